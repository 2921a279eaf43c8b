"""Decoding: how ids are drawn, a batch at a time.

- `sample`: the batched, grammar-masked decoding loop (`generate`)
- `draw`: one id per row of the batch, with each row's effects
- `filters`: the pure logit filters, in their one order, and plain decoding's options
- `steer`: `Steered`, a row's grammar and rules, their effects composed (the one place)
- `guidance`: the phrase-label guidance (two logits mixed per step)
"""
