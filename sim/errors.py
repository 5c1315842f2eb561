"""The one exception type for bad user input.

`SimInputError` is a `ValueError` whose message is one line naming the field,
row or flag at fault. The CLI turns it into ``error: <message>`` and exit code 2;
the dashboard shows it in an error box.
"""

__all__ = ["SimInputError"]


class SimInputError(ValueError):
    """Bad input: an unknown name, a malformed file or an absurd value."""
