"""Model cards of the shipped models and the training summary they quote: `summary` (what an
export keeps of its run), `render` (the card's markdown), `acceptance` (the acceptance tables on the
POP909 cards), `band` (the groove card's band table). Callers:
scripts/reproduce/export_checkpoint.py and write_model_cards.py."""

from musicgen.cards.render import CardText, render_card, write_cards
from musicgen.cards.summary import export_summary

__all__ = ["CardText", "export_summary", "render_card", "write_cards"]
