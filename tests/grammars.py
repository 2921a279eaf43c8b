"""Grammar wraps and rule helpers the tests share."""

from __future__ import annotations

from musicgen.generation.api.options import SamplingOptions
from musicgen.generation.controls.chord_plan import check_progression
from musicgen.generation.controls.form_plan import form_sections
from musicgen.generation.decoding.steer import Steered
from musicgen.generation.rules import ChordPlan, Controls
from musicgen.tokenizers.base import Grammar
from musicgen.tokenizers.form import parse_form


class ValidityOnly(Grammar):
    """A grammar_wrap with the wrapped grammar's mask alone (no `sampling_mask`, no
    `redirects`): an untrained model's near-uniform draws under the groove note bound keep a drum
    note sounding and move time a tick at a time, so a test of bar counting would hit its step
    cap first."""

    def __init__(self, grammar, ids=()):
        self.inner = grammar

    errors = property(lambda self: self.inner.errors)

    def allowed(self):
        return self.inner.allowed()

    def advance(self, tok):
        return self.inner.advance(tok)

    def finished(self):
        return self.inner.finished()

    def completion(self):
        return self.inner.completion()


def controls(tok, chords=None, form=None, start_bar: int = 0, open_bar: bool = True) -> Controls:
    """The controls a request with `chords` (text, list or Progression) and `form` (text or
    phrases) gives the rules, the progression starting at `start_bar`."""
    phrases = parse_form(form) if isinstance(form, str) else form
    return Controls(
        tuple(form_sections(tok, phrases)) if phrases else (),
        None if chords is None else ChordPlan(check_progression(tok, chords), start_bar, open_bar),
    )


def steered(tok, chords=None, form=None, start_bar: int = 0, open_bar: bool = True, **options):
    """A `grammar_wrap`-shaped factory (grammar, ids) -> `Steered`: the grammar with the rules
    such a request starts (`options`: the sampling options, e.g. chord_tones=2)."""
    given = controls(tok, chords, form, start_bar, open_bar)
    opts = SamplingOptions(**options).validate()
    return lambda grammar, ids: Steered.start(tok, opts, given, list(ids), grammar)
