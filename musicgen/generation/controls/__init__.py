"""The controls' request side: a progression and a form read and checked for a model, and
planned against the prompt, before sampling; the rules that force them while sampling are
`rules.chord_control` and `rules.form_control`.

- `progression`: chord progressions from text, chord files and MIDI
- `chord_plan`: a progression checked for a model and planned against the prompt
- `form_plan`: a form read, drawn or placed, and chords given per section
"""
