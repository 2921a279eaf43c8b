"""The generation half: tokens back to music. Every module, by role:

The API (what a caller uses)
- `api`: `load`, `Model` (the one generation path, `Model.pieces`: the CLI, the demo, `evaluate`
  and the studio call it; arguments checked there; a request's form and chords become the
  rules' controls in `Model._controls`) and re-exports of `Music`, `GenerationRequest`
- `request`: `GenerationRequest`, every option of a call with its default, range and help; the
  CLI's flags derive from it
- `options`: every sampling option gathered from where it is declared (`OPTIONS`), and what
  derives from them: `SamplingOptions`, `RANGES`, `check`, the studio's and the sweep's names
- `music`: `Music` (a piece: save, score, piano roll, audio)
- `prompt`: the one prompt builder (the first bars that hold music, exact bars, or seconds of a
  MIDI file) and the merge rule
- `legato`: the written melody's legato (an edit of the score, applied by `Model.music`)
- `write`: output names claimed exclusively (concurrent runs share a folder safely) and the one
  "write the pieces" step of `generate`, `continue` and the demo
- `tokenfile`: ids written to and read from JSON (`--save-tokens`, `musicgen export`)
- `render`: piano-roll PNG and audio (FluidSynth or the pip-only synthesizer)

Decoding (how ids are drawn; `decoding/`)
- `decoding.sample`: the batched, grammar-masked decoding loop (`generate`)
- `decoding.draw`: one id per row of the batch, with each row's effects
- `decoding.filters`: the pure logit filters, in their one order, and plain decoding's options
- `decoding.steer`: `Steered`, a row's grammar and rules, their effects composed (one place)
- `decoding.guidance`: the phrase-label guidance (two logits mixed per step)

The rules (what the music must do; `rules/`, one module each, the registry `rules.RULES`)
- `rules.base`: the `Rule` protocol, `Option`, `Start`, `Controls`
- `rules.chord_control`, `rules.form_control`: the controls (a progression, a form) forced
- `rules.min_tokens`, `rules.melody_due`, `rules.melody_range`, `rules.opening`,
  `rules.bar_copy`, `rules.in_key`: the sampler's musical rules

The controls' request side (read and checked before sampling)
- `progression`: chord progressions from text, chord files and MIDI
- `chords`: a progression checked for a model and planned against the prompt (`chord_plan`)
- `form`: forms read, drawn or placed, and chords given per phrase
"""
