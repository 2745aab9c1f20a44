"""Sender-owned sent history: the hash-linked ledger (:mod:`~orkeon_actors.history.ledger`).
The rows, intents and coverage built on it come with the durable adapter's send paths."""
