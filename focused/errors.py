"""Errors that mean "the user asked for something wrong" and must end a run with one line."""


class ConfigError(ValueError):
    """A bad spider argument, strategy parameter or setting.

    Its message is shown to the user as it is, on one line, with no traceback.
    """
