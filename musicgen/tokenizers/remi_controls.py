"""What a control (generation.controls.chord_plan) and the musical clock read of the REMI
vocabulary: the `RemiControls` mixin of `tokenizers.remi.RemiTokenizer` (bar-start, chord and
pitch-class ids, the time tables). It reads the tokenizer's `tables`, `options`, `bar_id`,
`vocab_size` and its miditok tokenizer's chord maps."""

from __future__ import annotations

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.tokenizers.base import TimeTables
from musicgen.tokenizers.chords import fold_quality
from musicgen.tokenizers.remi_grammar import RemiTables


class RemiControls:
    """The control and time interface of `RemiTokenizer` (a mixin: no state of its own)."""

    # --- what a control needs (generation.controls.chord_plan) ---------------------------------

    def bar_start_ids(self) -> list[int]:
        """The ids that open a bar."""
        return [self.bar_id]

    def chord_qualities(self) -> list[str]:
        """The chord qualities the vocabulary holds (what annotations and forced chords fold
        onto)."""
        return list(self._mt.config.chord_maps)

    def chord_token(self, root: int, pitch_classes) -> int | None:
        """The Chord id of a chord (root, its pitch classes above the root): the quality whose
        pitch set is the largest subset of the chord's, as for annotations (C:maj6 -> C:maj);
        None where no quality fits (C5)."""
        quality = fold_quality(pitch_classes, self._mt.config.chord_maps)
        return self.tables.chord_to_id.get((int(root), quality)) if quality else None

    def chord_mask(self) -> np.ndarray:
        """bool[vocab]: the Chord ids."""
        return self.tables.family == RemiTables.CHORD

    def pitch_class_mask(self, pitch_classes) -> np.ndarray:
        """bool[vocab]: the Pitch ids whose pitch class is one of `pitch_classes`."""
        pitch = self.tables.pitch
        return (pitch >= 0) & np.isin(pitch % 12, sorted(pitch_classes))

    # --- musical time -----------------------------------------------------------------------

    def time_tables(self) -> TimeTables:
        """Bar opens a bar (position 0), Position_p sets p; every bar is 4/4 (16 positions)."""
        t = self.tables
        per_beat = int(self.options["positions_per_beat"])
        per_bar = 4 * per_beat  # time signatures are ignored: every bar is 4/4
        if int(t.position.max()) >= per_bar:
            raise MusicgenError(
                f"tokenizer: Position_{int(t.position.max())} does not fit a "
                f"4/4 bar of {per_bar} positions"
            )
        is_bar = (t.family == RemiTables.BAR).astype(np.int64)
        position = np.where(is_bar == 1, 0, t.position).astype(np.int64)
        return TimeTables(
            bar=is_bar,
            position=position,
            shift=np.zeros(self.vocab_size, np.int64),
            positions_per_bar=per_bar,
            positions_per_beat=per_beat,
            note=(t.family == RemiTables.PITCH).astype(np.int64),
            recall=self._recall_marks(),
        )

    def _recall_marks(self) -> np.ndarray | None:
        if not self.options.get("recall"):
            return None
        marks = np.zeros(self.vocab_size, np.int64)
        marks[self.token_id("Recall_Start")], marks[self.token_id("Recall_End")] = 1, -1
        return marks

    def note_end_mask(self) -> np.ndarray:
        return self.tables.family == RemiTables.DURATION
