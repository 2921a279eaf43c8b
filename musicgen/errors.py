"""One exception type for user-facing problems.

Anything raised as `MusicgenError` is printed by the CLI as a single line (`error: ...`) with a
non-zero exit code; every other exception is a bug and keeps its traceback.
"""


class MusicgenError(Exception):
    """A problem with the user's input (file, option, config, checkpoint), not with musicgen."""
