"""The one exception type for bad user input.

`SimInputError` is a `ValueError` whose message is one line naming the field,
row or flag at fault. The CLI turns it into ``error: <message>`` and exit code 2;
the dashboard shows it in an error box.

`SimInputWarning` is input that is valid but does nothing for this run (a
cluster's inter-node network when every GPU is in one node): the CLI prints
``warning: <message>`` to stderr and goes on (exit code 0).
"""

__all__ = ["MAX_MESSAGE_CHARS", "SimInputError", "SimInputWarning"]

#: A message longer than this is cut in the middle (a value the user gave is echoed back, and it may
#: be a megabyte long): its start names the field, its end the valid choices.
MAX_MESSAGE_CHARS = 1000


class SimInputError(ValueError):
    """Bad input: an unknown name, a malformed file or an absurd value."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str) and len(args[0]) > MAX_MESSAGE_CHARS:
            text = args[0]
            args = (f"{text[:MAX_MESSAGE_CHARS * 3 // 5]} ...({len(text):,} characters)... "
                    f"{text[-MAX_MESSAGE_CHARS // 3:]}",)
        super().__init__(*args)


class SimInputWarning(UserWarning):
    """Input that is valid but does nothing for this run (one line naming the flag)."""
