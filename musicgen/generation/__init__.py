"""The generation half: tokens back to music.

- `api`: `load`, `Model` (the one generation path, `Model.pieces`: the CLI, the demo, `evaluate
  style` and the studio call it; arguments checked there) and `Music` (a piece: save, score,
  piano roll, audio)
- `sample`: the grammar-masked, batched sampler, its options and their one set of defaults
- `prompt`: the one prompt builder (the first bars that hold music, exact bars, or seconds of a
  MIDI file) and the merge rule
- `write`: output names claimed exclusively (concurrent runs share a folder safely) and the one
  "write the pieces" step of `generate`, `continue` and the demo
- `tokenfile`: ids written to and read from JSON (`--save-tokens`, `musicgen export`)
- `render`: piano-roll PNG and audio (FluidSynth or the pip-only synthesizer)
"""
