"""Prepared datasets: `prepare` writes them, `dataset` reads crops from them."""
