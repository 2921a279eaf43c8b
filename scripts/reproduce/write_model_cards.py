"""Write checkpoints/<name>/README.md (model cards) from the outputs of evaluate_shipped.sh.

    python scripts/reproduce/write_model_cards.py [--eval out/eval] [NAME ...]

Each card states the data and its licence, the architecture, the training run (steps, wall time),
validation loss within and beyond the training length, the evaluation metrics and the commands
that reproduce it. Numbers come from the JSON files only, never typed by hand (`musicgen.cards`
reads and renders them); what is here is the prose about each shipped model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from musicgen.cards import CardText, write_cards

ROOT = Path(__file__).resolve().parents[2]

# the whole-song pop model (checkpoints/pop909_sine_spe_gated) has a hand-written card from its
# training and `evaluate form --whole-song` tables; these cards are written from JSON
SHIPPED = (
    "pop909_piano_sine_spe_gated",
    "pop909_ape",
    "groove_sine_spe_gated",
    "maestro_sine_spe_gated",
)

DATA = {
    "pop909": "POP909 (Music X Lab; 850 pop songs arranged for piano; MIT licence, "
    "https://github.com/music-x-lab/POP909-Dataset): 811 songs for training, 39 held out "
    "by musicgen's stable hashed split. The weights are a derivative of POP909 and are "
    "shared under the same MIT terms with its attribution.",
    "maestro": "ASAP's 595 MAESTRO v3 performances (Foscarin et al. 2020, ASAP, from Hawthorne et "
    "al. 2019, MAESTRO; `../shared/data/asap_maestro`), split per piece: 505 pieces for "
    "training, 60 validation, 29 test (one duplicate skipped), tokenized with the expressive "
    "REMI (`configs/tokenizer/remi_expressive.yaml`: 16 positions per beat, 32 velocities, "
    "pedal folded into durations). MAESTRO and ASAP are CC BY-NC-SA 4.0, so these weights are "
    "too: **non-commercial use only, share-alike, with attribution** to MAESTRO (Google "
    "Magenta) and ASAP.",
    "groove": "the POP909 trio set (`scripts/reproduce/make_pop909_trio.py`, seed 0; "
    "`musicgen/data/trio_pop909.py`): whole POP909 songs' piano accompaniment (BRIDGE and "
    "PIANO tracks) as the third part, bass lines derived from their chord annotations, and "
    "Groove MIDI Dataset drum performances matched by tempo; 654 training songs in 8 drum "
    "genres, test genres (afrobeat, blues, country, New Orleans, pop) never seen in training. "
    "POP909: Music X Lab, MIT licence, https://github.com/music-x-lab/POP909-Dataset. Groove "
    "MIDI Dataset: Google Magenta, CC BY 4.0, https://magenta.tensorflow.org/datasets/groove. "
    "The weights carry both attributions (CC BY 4.0).",
}

LIMITS = {
    "pop909": "A small model (4.9 M parameters, 31.7-32.2 M training tokens on a CPU), far from a "
    "converged paper-size model. It knows where it is in the bar and when the notes at one onset "
    "make a full chord (stacked onsets above), and its blocks 1-4 attend over the "
    "last 1024 positions, far enough back to reach the previous phrase. Its sampling defaults "
    "(T 1.0, top-p 0.9 and a bonus for finishing a copy of the bar 4 or 8 back: 4 nats for the "
    "sineSPE model, 3.5 for the APE model; docs/generation.md) were chosen on the form benchmark "
    "(docs/evaluation.md, 'Phrase lags'): each model's nearest setting that meets the acceptance "
    "bands for rhythm repeats, bar self-similarity, repeated bars and scale consistency with its "
    "texture within noise of the real continuations. The bonus is a threshold, not a dial: "
    "below 3.5 nats almost no copy is finished, at 4.5 whole phrases loop. The model alone does "
    "not bring the phrase back: without the bonus (`--repeat 0`) no continued bar repeats an "
    "earlier one exactly and the bar 8 back is as unlike as any other (0.24-0.25); with it the "
    "similarity 8 bars back reaches 0.32-0.38 against the songs' 0.47, and an unbroken "
    "top-voice line covers about 54 % of the beats against 69 %. From scratch (the music "
    "statistics above: 16 bars, no prompt) the bonus has only the model's own first bars to "
    "copy, and at 4 nats the sineSPE model repeats 10.6 % of bars against the songs' 2.6 % (the "
    "APE model at 3.5 nats: 2.0 %); `--repeat 3.5` is the gentler choice there. Duplicate notes "
    "are 0 by "
    "construction: the grammar lets a pitch sound once per position, and the mass the model "
    "still puts on such a pitch is counted as forbidden above.",
    "maestro": "A small model (6 blocks of d_model 256, 5.1 M parameters, 15.2 M training tokens "
    "on a CPU). MAESTRO's files carry one tempo (120 bpm) and no meter, so its 'bar' is a 2-second "
    "window of the performance, a position one of the window's 64 steps of 31.25 ms, and the bar "
    "index mod 4 an 8-second span: the musical inputs tell it where it is on the clock, not in "
    "the score, and what it learns of metre it learns from the notes. With them it no longer "
    "puts its probability behind the current position (forbidden mass above) and no longer "
    "strikes chords into silence. Its sampling default (T 1.1, top-p 0.9) was chosen on the "
    "sweep of docs/evaluation.md: at T 1.2 it leaves the key (scale consistency 0.81 against "
    "0.89), at T 0.9 it clings to it (0.97) and plays one note at a time. What it lacks is the "
    "line: it plays fewer notes together than a pianist (polyphony 1.9 against 2.3) and short "
    "notes scattered over the keyboard's middle, with no voice that continues and no figure that "
    "comes back (a hand-held melody, a bass line, a repeated pattern); nothing of a piece's form "
    "is there. It also re-strikes a pitch within a sixteenth note more often than a pianist "
    "(duplicate notes 1.4 % against 0.01 %: the grammar forbids a pitch twice at one position, "
    "not at the next of the 16 positions per beat). Non-commercial use only (CC BY-NC-SA 4.0, "
    "from MAESTRO and ASAP).",
    "groove": "**What it plays.** Bass, drums and piano together, in 4/4, in drum genres it "
    "never saw (the test genres): at its defaults (T 0.9, top-p 0.9, chosen on the band measure "
    "and the style of continuations over 8 settings of T 0.8-1.1 and top-p 0.8-0.95, 3 seeds: "
    "docs/evaluation.md, 'Groove sampling defaults'; the bass one note at a time, below) 83 % of "
    "24 pieces of 8 bars from scratch (3 seeds of 8; the table's 24 of seed 0: 92 %) and 47 of "
    "48 8-bar continuations of 16 test songs' first 2 bars play as a band (piano in 88 % / 99 % "
    "of bars, 21.8 / 21.7 drum hits a bar against the songs' 23.2). Continuations keep the "
    "prompt's style in every quarter of 1024 tokens: time-pitch similarity 0.69 / 0.68 / 0.69 / "
    "0.68 and onset-duration 0.70 / 0.70 / 0.69 / 0.67, against the songs' real continuations "
    "0.74-0.80 and 0.81-0.83 and another song's real continuation 0.53-0.58 and 0.46-0.50. "
    "**How the sampler helps it.** It loses track of notes it started (on held-out songs 17 % "
    "of its probability falls on ids the grammar forbids, most of it on NoteOffs of pitches that "
    "are not sounding: `evaluate nll`'s forbidden mass). The sampler moves that probability to "
    "the notes that are (NoteOff redirects), lets the bass start a note only once its last one "
    "has ended (every bass line of the trio set is one note at a time; without this rule half "
    "its bass notes rang on under the next, and its continuations' onset-duration similarity "
    "fell from 0.62 to 0.54-0.56 after the first quarter), and ends any bass or piano note "
    "after one bar and any drum note after one tick (docs/tokenization.md): 6 % (from scratch) "
    "and 3 % (continuing) of its bass and piano notes reach that bound, where 0.4 % of the "
    "songs' notes are as long. **What it does not.** Its piano keeps its prompt's rhythm least "
    "(onset-duration 0.31-0.35 per quarter, the bass 0.92-0.97, the drums 0.77-0.79). From "
    "scratch it plays fewer drum pitches than the songs (4.4 against 7.2). Its bass is the trio "
    "set's: one-bar patterns on chord roots, fifths and octaves, not a bassist's line; its "
    "drums are Groove MIDI's 4/4 beats; it has no melody and no other instruments, and it does "
    "not transfer a song into another style (Groove2Groove's task): it continues or writes a "
    "trio. A small model (3.6 M parameters, 25.0 M training tokens on a CPU).",
}


# How each shipped run was trained (the numbers come from the run's log through export.json).
TRAINING = {
    "pop909": "one cosine schedule over all steps; musical-position embeddings on (position in "
    "bar, beat, bar mod 4; docs/model.md). The two POP909 runs trained side by side, one thread "
    "each, with nothing else on the machine (`scripts/reproduce/train_shipped.sh pop909`); the "
    "sineSPE run, the slower, was stopped at step 3672 when the APE run ended and resumed "
    "(`--resume`) on two threads for its last 828 steps",
    "maestro": "from scratch, one cosine schedule, with the embeddings of the position in the "
    "2-second window, the beat and the window index mod 4 and the count of notes at the current "
    "onset (`model.musical`; docs/model.md); one thread, beside one-thread evaluation jobs of the "
    "POP909 pair (`THREADS=1 MINUTES=140 scripts/reproduce/train_shipped.sh maestro`)",
    "groove": "one cosine schedule per phase, the musical-position inputs on "
    "(`model.musical.embed`), bf16 autocast (`precision: auto` on a CPU with AMX), the machine's "
    "only job (phase 2's first 973 steps beside a one-thread benchmark); phase 2 reads crops of "
    "2048 tokens, about 16 bars, so a continuation's later bars can lean on its first "
    "(`scripts/reproduce/train_shipped.sh groove`; training/groove_pop909_phase1/README.md, "
    "training/groove_pop909_phase2/README.md)",
}

# Phases 2, 3, ... per family (scripts/reproduce/train_shipped.sh): what each fine-tune changed,
# and how it ran
POP909_FINE_TUNES = [
    (
        "with one input added, the count of notes the current onset already holds "
        "(`model.musical.notes_at_onset`, a zero-initialised embedding; docs/model.md), on the "
        "data as prepared since notes of one pitch at one position are merged",
        "one cosine schedule; the two runs side by side, one thread each, with beside them only "
        "one-thread helper jobs for the first minutes and, at the lowest CPU priority (nice 19), "
        "data preparation and tests",
    ),
    (
        "on crops of 1024 tokens (twice the bars to repeat from) that start on bars 0, 4, 8, ... "
        "of the song (`data.start_bar_every: 4`), so the bar-mod-4 embedding counts the song's "
        "own bars",
        "one cosine schedule; the two runs side by side, one thread each, with beside them two "
        "short one-thread tests at the lowest CPU priority (nice 19) and, once the APE run had "
        "ended (the sineSPE run's last 17 minutes), at nice 19 a one-thread benchmark of "
        "`torch.compile` (whose compilation starts more processes) and the APE model's "
        "evaluation",
    ),
    (
        "with blocks 2 and 4 turned into exact causal softmax attention over the last 512 "
        "positions with rotary positions (`model.local_layers`, `model.local_window`, "
        "`model.local_rope`; docs/model.md): attention that can be sharp enough to copy a bar, "
        'which FAVOR+ is not (docs/evaluation.md, "Does a model copy?"); the two blocks keep '
        "their learned q, k, v and output weights",
        "one cosine schedule; the two runs side by side, one thread each, with beside them only "
        "one-thread tests at the lowest CPU priority (nice 19): a 2-minute test module and, as "
        "the APE run ended, the 3-minute test suite",
    ),
    (
        "on crops of 2048 tokens starting on bars 0, 4, 8, ... (phrases), with blocks 1 to 4 "
        "windowed softmax over the last 1024 positions (blocks 0 and 5 keep FAVOR+ with the "
        "model's positional encoding): in these songs the nearest earlier copy of a repeated "
        "bar lies a median 883 tokens back, beyond phase 4's 512-position window; "
        "blocks 1 and 3 keep their learned q, k, v and output weights",
        "one cosine schedule; the two runs side by side, one thread each, started from the "
        "committed phase-4 folders (`FROM_SHIPPED=1 scripts/reproduce/train_shipped.sh "
        "pop909`), with beside them only the editing of code and documents",
    ),
    (
        "with phase 5's recipe at lr 1.5e-4, the first half of the further training planned "
        "(twice the phase-4 models' 15.8 M tokens)",
        "one cosine schedule; the two runs side by side, one thread each, from the committed "
        "phase-5 folders (`FROM_TRAINING=training/pop909_phase5 scripts/reproduce/"
        "train_shipped.sh pop909`), the sineSPE run stopped by its 128-minute safety stop",
    ),
    (
        "with the same recipe, to the token budget",
        "one cosine schedule; the two runs side by side, one thread each, from the committed "
        "phase-6 folders (`FROM_TRAINING=training/pop909_phase6 SUFFIX=more2 MORE_STEPS=3400 "
        "scripts/reproduce/train_shipped.sh pop909`), with beside them the editing of code and "
        "a one-thread test run in the sineSPE run's last 10 minutes",
    ),
]
FINE_TUNES = {
    "pop909": POP909_FINE_TUNES,
    "maestro": [
        (
            "at half the learning rate with a 50-step warm-up, to 15 M tokens",
            "one cosine schedule, two threads, from the committed phase-1 folder "
            "(`FROM_TRAINING=training/maestro_phase1 MAESTRO_STEPS=1900 "
            "scripts/reproduce/train_shipped.sh maestro`), with beside it only the editing of "
            "code and documents",
        )
    ],
}

# What the piano rolls of the pieces in out/eval/samples_<name> show (looked at, not computed).
SEEN = {
    "pop909_ape": "A continuation at the defaults (the form benchmark's song 044; bar n is beats "
    "4n-4 to 4n of its piano roll, the prompt bars 1-4 with a pickup): the prompt comes back "
    "unchanged; over the continued bars 5-16 a low note (MIDI 29-46) opens almost every bar, "
    "with chord tones in MIDI 48-66 after it and, from bar 9, short notes in MIDI 66-76 above; "
    "in bars 12-16 this bass-then-chord figure keeps its shape from bar to bar, an "
    "accompaniment that repeats by bar, but the top notes do not join into a line that "
    "phrases: they sit on the chord tones rather than move as a melody.",
    "maestro_sine_spe_gated": "Pieces from scratch at the defaults (4096 tokens, about 50 "
    "two-second windows; pieces 0 and 3, beat n of the piano roll is 0.5 s): short notes, rarely "
    "more than two at once, spread evenly over MIDI 43-81 from the first window to the last, "
    "with no collapse into struck chords (Perceiver S's defect) and no silence; but no voice "
    "runs for more than a few notes, the register does not move, and nothing recurs. A real "
    "performance beside it (validation piece 0) moves in lines that rise and fall through "
    "MIDI 40-84 with held notes under them; nothing of that is there yet.",
    "pop909_piano_sine_spe_gated": "A continuation at the defaults (the form benchmark's song 017; "
    "bar n is beats 4n-4 to 4n of its piano roll, the prompt bars 1-5 with a pickup): the prompt "
    "comes back unchanged; from bar 7 a top voice of short notes in MIDI 68-78 runs to the end "
    "over an accompaniment that keeps one figure bar by bar through bars 10-17: a bass note "
    "(MIDI 35-47, stepping down over bars 11-14) near the bar's start and two or three chord "
    "tones in MIDI 50-66 after it. A melody over an accompaniment that repeats by bar, but the "
    "top voice wanders in short notes and does not phrase in 4 bars as the song's does.",
}


# what the earlier POP909 models were trained on (phases 1-4)
PREVIOUS_TOKENS = 4500 * 4 * 512 + 1000 * 2 * 1024 + 1200 * 2 * 1024 + 1000 * 2 * 1024

# per family: what it is, its preset, where evaluate_shipped.sh / compare_perceiver.sh left the
# numbers (under --eval), what the generated pieces were and how to reproduce it
FAMILIES = {
    "pop909": {
        "kind": "pop-piano (one voice: melody and accompaniment merged; the pair of the APE "
        "comparison, whose sineSPE model the whole-song model `pop909_sine_spe_gated` continues)",
        "preset": "configs/pop909/small.yaml with the overrides in "
        "`scripts/reproduce/train_shipped.sh`",
        "nll": "pop909_nll",
        "pieces": "pieces of 16 bars from scratch ({sampling}, grammar on, seed 0)",
        "reference": "held-out POP909 songs",
        "reproduce": [
            "scripts/reproduce/train_shipped.sh pop909      # trains into runs/ (rerun to resume)",
            "PREVIOUS_FULL=1 scripts/reproduce/evaluate_shipped.sh pop909   # export, measure",
        ],
    },
    "maestro": {
        "kind": "expressive classical-piano",
        "preset": "configs/maestro/musical_small.yaml with the overrides in "
        "`scripts/reproduce/train_shipped.sh`",
        "nll": "maestro_nll",
        "pieces": "pieces of 4096 tokens from scratch ({sampling}, grammar on, seed 0)",
        "reference": "held-out MAESTRO performances (their first 4096 tokens)",
        "reproduce": [
            "scripts/reproduce/train_shipped.sh maestro   # phase 1: runs/maestro_small",
            "FROM_TRAINING=runs MAESTRO_STEPS=1900 scripts/reproduce/train_shipped.sh maestro"
            "   # phase 2",
            "scripts/reproduce/evaluate_shipped.sh maestro sweep   # export, measure",
        ],
    },
    "groove": {
        "kind": "groove (bass, drums, piano)",
        "preset": "configs/groove/small.yaml with the overrides in "
        "`scripts/reproduce/train_shipped.sh`",
        "nll": "groove_nll",
        "pieces": "",
        "reference": "",
        "reproduce": [
            "scripts/reproduce/train_shipped.sh groove      # trains into runs/ (rerun to resume)",
            "scripts/reproduce/evaluate_shipped.sh groove   # export to checkpoints/, measure",
            "python scripts/experiments/groove_band_sweep.py checkpoints/groove_sine_spe_gated "
            "--T 0.8,0.9,1.0 --top-p 0.8,0.9,0.95 --seeds 0,1,2   # the defaults' grid",
        ],
    },
}


# The replaced (phase-4) models' texture and continuation numbers as their cards recorded them
# (the same commands and sizes): quoted when PREVIOUS_FULL=1 did not measure them again.
PREVIOUS_DOCUMENTED = {
    "pop909_piano_sine_spe_gated": {
        "stacked": "0.0 % (its card)",
        "duplicates": "0.0 % (its card)",
        "kept": "20/20 / 20/20 (its card)",
        "quarters": "4 of 4 (0.74 / 0.74 / 0.74 / 0.77 vs 0.64 / 0.68 / 0.69 / 0.72; its card)",
    },
    "pop909_ape": {
        "stacked": "0.1 % (its card)",
        "duplicates": "0.0 % (its card)",
        "kept": "20/20 / 20/20 (its card)",
        "quarters": "4 of 4 (0.74 / 0.74 / 0.74 / 0.74 vs 0.64 / 0.68 / 0.69 / 0.72; its card)",
    },
    # the earlier Perceiver S model (4 pieces of 4096 tokens at T 1.2, its card)
    "maestro_sine_spe_gated": {
        "name": "maestro_perceiver_s",
        "stacked": "9.6 % (its card)",
        "notes_per_onset": "3.27 (its card)",
        "scale_consistency": "0.606 (its card)",
    },
}


TEXT = CardText(
    data=DATA,
    limits=LIMITS,
    training=TRAINING,
    fine_tunes=FINE_TUNES,
    seen=SEEN,
    families=FAMILIES,
    previous_documented=PREVIOUS_DOCUMENTED,
    previous_tokens=PREVIOUS_TOKENS,
    twin={"pop909_piano_sine_spe_gated": "pop909_ape", "pop909_ape": "pop909_piano_sine_spe_gated"},
    script="python scripts/reproduce/write_model_cards.py",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=Path, default=ROOT / "out" / "eval")
    ap.add_argument("names", nargs="*", default=list(SHIPPED), help="cards to write")
    args = ap.parse_args()
    for path in write_cards(ROOT, args.names, args.eval, TEXT):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
