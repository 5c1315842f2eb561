"""The one exception type for bad user input.

`SimInputError` is a `ValueError` whose message is one line naming the field,
row or flag at fault. The CLI turns it into ``error: <message>`` and exit code 2;
the dashboard shows it in an error box.

`SimInputWarning` is input that is valid but does nothing for this run (a
cluster's inter-node network when every GPU is in one node): the CLI prints
``warning: <message>`` to stderr and goes on (exit code 0).
"""

__all__ = ["SimInputError", "SimInputWarning"]


class SimInputError(ValueError):
    """Bad input: an unknown name, a malformed file or an absurd value."""


class SimInputWarning(UserWarning):
    """Input that is valid but does nothing for this run (one line naming the flag)."""
