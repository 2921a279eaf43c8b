"""The studio page as a songwriter reads it, without a browser: every visible label and help
line in plain words (`words.JARGON`), the form builder, chords typed per section by name, and
controls a model cannot use hidden. The player's drawing: test_studio_player.py; the page in
Chromium: test_studio_browser.py."""

from __future__ import annotations

import pytest

from musicgen.errors import MusicgenError
from musicgen.studio import controls, inputs, jobs, words
from tests.paths import ROOT

pytest.importorskip("gradio", reason="the studio extra is not installed (gradio)")
LABEL = "pop909_sine_spe_gated"
CLASSICAL = "maestro_sine_spe_gated"


@pytest.fixture(scope="module")
def cache():
    return jobs.ModelCache(jobs.model_choices([ROOT / "checkpoints" / LABEL]), "cpu")


def shown_texts(config: dict) -> dict[str, str]:
    """Every label, help line and button text of the page's components, by component."""
    out = {}
    for c in config["components"]:
        props = c.get("props", {})
        if props.get("visible") is False and props.get("elem_id") not in ("form", "chords"):
            continue  # the API's own picture; the song boxes are checked though hidden at first
        name = f"{c['type']} {props.get('elem_id') or c['id']}"
        text = " ".join(str(props.get(k) or "") for k in ("label", "info", "value")
                        if c["type"] in ("button",) or k != "value")  # fmt: skip
        out[name] = text
    return out


def test_every_label_is_in_a_musician_s_words(cache, tmp_path):
    from musicgen.studio import app

    config = app.build(cache, tmp_path).get_config_file()
    texts = shown_texts(config)
    assert any("Adventure" in t for t in texts.values())  # the labels were read
    found = {name: words.jargon_in(text) for name, text in texts.items()}
    assert {n: f for n, f in found.items() if f} == {}
    # the sampling settings are under one folded Advanced, each with what it does
    accordions = [c["props"] for c in config["components"] if c["type"] == "accordion"]
    assert [a["label"] for a in accordions] == ["Advanced", "About this model"]
    assert all(not a["open"] for a in accordions)
    for name in inputs.SAMPLING:
        label, info = words.SAMPLING[name]
        assert label and info.endswith(".")


def test_the_jargon_check_finds_the_developer_words():
    assert words.jargon_in("temperature (0 = greedy)") == ["greedy", "temperature"]
    assert words.jargon_in("top-p (1 = off), nats") == ["top-p", "nats"]
    assert words.jargon_in("seed (-1: a new one)") == ["seed"]
    assert words.jargon_in("e.g. i4 A8 B8 o4") == ["i4", "o4"]
    assert words.jargon_in("Harte labels, MIDI pitch, a third track") == [
        "midi pitch", "harte", "third"
    ]  # fmt: skip
    assert words.jargon_in("Take number: the same number makes the same piece again") == []


def test_the_form_builder_writes_the_form_in_order():
    form = ""
    for name, bars in (("Intro", 4), ("Verse", 8), ("Chorus", 8), ("Outro", 4)):
        form = words.add_section(form, name, bars)
    assert form == "i4 A8 B8 o4" and controls.check_form(form) == "i4A8B8o4"
    assert words.add_section("auto", "Verse", 8) == "A8"  # a built form replaces 'auto'
    assert words.named_form(form) == "Intro 4, Verse 8, Chorus 8, Outro 4"
    with pytest.raises(MusicgenError, match="^section bars: must be 1 to 32"):
        words.add_section(form, "Verse", 0)
    with pytest.raises(MusicgenError, match="^section: choose one of Intro"):
        words.add_section(form, "Refrain", 8)


def test_chords_per_section_by_name():
    assert inputs.check_chords("Verse: C G; chorus: F") == "A: C G; B: F"
    assert inputs.check_chords("Am F C G") == "Am F C G"
    table = controls.preview("Verse: C G; Chorus: F", words.add_section("A2", "Chorus", 2), 4)
    assert "| 1 Verse | 2 | 3 Chorus | 4 |" in table and "| C | G | F | F |" in table


def test_form_help_offers_densities_only_to_a_model_that_learnt_them(cache):
    assert "1 sparse to 8 full" in words.form_info(True)
    assert "@" not in words.form_info(False) and "sparse" not in words.form_info(False)
    assert not controls.has_densities(cache.get(LABEL))  # no shipped model has densities


def test_the_classical_model_shows_no_chord_or_form_box(tmp_path):
    from musicgen.studio import app

    both = jobs.ModelCache(jobs.model_choices([ROOT / "checkpoints" / LABEL]), "cpu")
    act = app.Actions(both, LABEL)
    song, classical = act.on_model(LABEL), act.on_model(CLASSICAL)
    assert song[2]["visible"] and song[3]["visible"] and song[-1]["visible"]
    assert not classical[2]["visible"] and not classical[3]["visible"]
    assert not classical[-1]["visible"]  # the form builder too
    assert "1 sparse" not in song[3]["info"]


def test_a_musician_s_card_with_pictures_that_show(cache):
    """The card on the page: a few plain lines and the card's pictures, in the card itself
    (the server serves no model file: its links were broken images)."""
    import base64
    import re

    from musicgen.studio.cards import musician_card

    song = musician_card(cache, LABEL)
    images = re.findall(r"!\[[^\]]*\]\(data:image/png;base64,([^)]+)\)", song)
    assert len(images) == 3 and all(base64.b64decode(x)[:4] == b"\x89PNG" for x in images)
    assert "](" not in re.sub(r"\]\(data:image/png;base64,[^)]+\)", "", song)  # no other link
    text = re.sub(r"\(data:[^)]+\)", "", song)
    assert "song form" in text and "chords" in text and "Adventure 0.9" in text
    assert "NLL" not in text and words.jargon_in(text) == []
    classical = musician_card(cache, CLASSICAL)
    assert "takes no form or chords" in classical and "data:" not in classical
