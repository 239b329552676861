"""The one exception family for bad user input: a one-line message naming the file/key/line."""


class InputError(ValueError):
    """Bad input (file, key, value). The CLI prints ``Error: <message>`` and exits with 2."""
