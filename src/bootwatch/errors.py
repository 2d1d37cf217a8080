"""The one exception type that the CLI turns into a message and exit code 2."""


class UsageError(Exception):
    """bootwatch was used wrongly or could not read its input; the message is for a person."""
