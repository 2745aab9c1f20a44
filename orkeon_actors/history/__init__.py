"""Sender-owned sent history: its values (:mod:`~orkeon_actors.history.endpoint`,
:mod:`~orkeon_actors.history.records`, :mod:`~orkeon_actors.history.view`), the
hash-linked ledger (:mod:`~orkeon_actors.history.ledger`) and the intent protocol of a
send (:mod:`~orkeon_actors.history.intents`). Their bytes belong to
:mod:`orkeon_actors.wire.sent_history`; the SQLite adapter keeps them
(:mod:`orkeon_actors.store.sent_history`)."""
