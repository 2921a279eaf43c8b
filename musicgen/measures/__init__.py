"""What is measured on music and on models, shared by training, generation, evaluation and
the cards: note statistics (`metrics.py`), form and repeats (`form.py`), the fidelity of a
tokenizer's round trip (`fidelity.py`), the band measure (`band.py`) and per-position
likelihood (`likelihood.py`)."""
