"""The generation half: tokens back to music. One subpackage per role, every module by role:

The API (what a caller uses; `api/`, its public names in `api/__init__.py`)
- `api.model`: `load`, `Model` (the one generation path, `Model.pieces`: the CLI, the demo,
  `evaluate` and the studio call it; arguments checked there; a request's form and chords become
  the rules' controls in `Model._controls`); `musicgen.load` and `generation.api` re-export them
  with `Music`, `GenerationRequest`
- `api.request`: `GenerationRequest`, every option of a call with its default, range and help;
  the CLI's flags derive from it
- `api.options`: every sampling option gathered from where it is declared (`OPTIONS`), and what
  derives from them: `SamplingOptions`, `RANGES`, `check`, the studio's and the sweep's names
- `api.music`: `Music` (a piece: save, score, piano roll, audio)
- `api.scoring`: a song's NLL under a model (`Model.score`, `Model.nll`)
- `api.prompt`: the one prompt builder (the first bars that hold music, exact bars, or seconds of
  a MIDI file); `api.prompt_merge`: what comes back (`merge`); `api.prompt_tempo`: the prompt's
  tempo; `api.written`: a written score matched to its prompt file
- `api.finish`: how a written piece sounds (tempo, transposition, instruments), its chords as
  markers (`api.chord_marks`); `api.legato`: the written melody's legato (applied by
  `Model.music`)
- `api.extend`, `api.regenerate`: a file extended from its end, or its bars written again
- `api.write`: output names claimed exclusively (concurrent runs share a folder safely) and the
  one "write the pieces" step of `generate`, `continue` and the demo
- `api.tokenfile`: ids written to and read from JSON (`--save-tokens`, `musicgen export`)
- `api.render`: piano-roll PNG and audio (FluidSynth or the pip-only synthesizer)

The controls' request side (read and checked before sampling; `controls/`)
- `controls.progression`: chord progressions from text, chord files and MIDI
- `controls.chord_plan`: a progression checked for a model and planned against the prompt
- `controls.form_plan`: forms read, drawn or placed, and chords given per phrase

Decoding (how ids are drawn; `decoding/`)
- `decoding.sample`: the batched, grammar-masked decoding loop (`generate`)
- `decoding.draw`: one id per row of the batch, with each row's effects
- `decoding.filters`: the pure logit filters, in their one order, and plain decoding's options
- `decoding.steer`: `Steered`, a row's grammar and rules, their effects composed (one place)
- `decoding.guidance`: the phrase-label guidance (two logits mixed per step)

The rules (what the music must do; `rules/`, one module each, the registry `rules.RULES`)
- `rules.base`: the `Rule` protocol, `Option`, `Start`, `Controls`, `BarClock` (a row's bar and
  position, followed id by id)
- `rules.chord_control`, `rules.form_control`: the controls (a progression, a form) forced
- `rules.min_tokens`, `rules.melody_due`, `rules.melody_range`, `rules.opening`,
  `rules.bar_copy`, `rules.in_key`: the sampler's musical rules
"""
