"""musicgen: symbolic music generation with Performers and stochastic positional encoding.

The public API (see README "Python"): `load` a model, then `Model.generate`,
`Model.continue_midi` and `Model.score`; results are `Music` (`.save`, `.to_score`,
`.piano_roll`, `.save_audio`). Imported lazily, so `import musicgen` stays cheap for the CLI.
"""

__version__ = "0.1.0"
__all__ = ["Model", "Music", "MusicgenError", "load", "render_audio"]


def __getattr__(name: str):
    if name in ("Model", "Music", "load"):
        from musicgen.generation import api

        return getattr(api, name)
    if name == "render_audio":
        from musicgen.generation.api.render import synthesize

        return synthesize
    if name == "MusicgenError":
        from musicgen.errors import MusicgenError

        return MusicgenError
    raise AttributeError(f"module 'musicgen' has no attribute '{name}'")
