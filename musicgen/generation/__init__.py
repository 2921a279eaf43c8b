"""The generation half: tokens back to music.

- `api`: `load`, `Model` (the one generation path: the CLI, the demo, `evaluate style` and the
  studio call it) and `Music` (a piece: save, score, piano roll, audio)
- `sample`: the grammar-masked, batched sampler and its options
- `prompt`: the one prompt builder (bars or seconds of a MIDI file) and the merge rule
- `tokenfile`: ids written to and read from JSON (`--save-tokens`, `musicgen export`)
- `render`: piano-roll PNG and audio (FluidSynth or the pip-only synthesizer)
"""
