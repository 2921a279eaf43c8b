"""Grammar wraps the tests share."""

from __future__ import annotations


class ValidityOnly:
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
