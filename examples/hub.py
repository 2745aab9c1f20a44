"""The event hub in one page: publish/subscribe, post, send/reply, waits, last values.

Run: python examples/hub.py
"""

from __future__ import annotations

import threading

import orkeon_actors as ok


def main() -> None:
    with ok.Runtime.start() as rt:  # in memory; Runtime.start(store="state.db") is the durable hub
        hub = rt.hub
        # A client is bound to a crew (and agent): the hub stamps the source, nobody can spoof it.
        planner = hub.bind("orders", "planner")
        scorer = hub.bind("fraud", "scorer")
        inbox = hub.register_mailbox("agent://fraud/scorer")  # an addressed mailbox

        # 1. publish / subscribe: topic patterns, * is one word, # is zero or more.
        with scorer.subscribe("orders.*") as sub:
            planner.publish("orders.created", {"order": 42})
            print("subscriber saw:", [m.json() for m in sub.drain()])

        # 2. post: fire-and-forget into a mailbox; the consumer waits for it.
        planner.post("agent://fraud/scorer", {"note": "new customer"})
        note = scorer.wait_for(ok.WaitOnMailbox("agent://fraud/scorer"), timeout=5)
        print("mailbox gave:", note.json(), "from", note.source_crew_id)

        # 3. send / reply: a request with a mandatory timeout; the responder replies by correlation id.
        def respond() -> None:
            with inbox.reader() as reader:
                request = reader.receive()
                assert request.correlation_id is not None
                scorer.reply(request.correlation_id, {"score": 0.12})

        responder = threading.Thread(target=respond)
        responder.start()
        answer = planner.send("agent://fraud/scorer", {"score_order": 42}, timeout=5)
        responder.join()
        print("reply:", answer.json())

        # 4. a finite wait that expires returns the hub's WaitTimedOutMessage (never an exception).
        timed_out = planner.wait_for(ok.WaitOnTopic("orders.cancelled"), timeout=0.1)
        print("wait ended:", timed_out.topic, "timed out:", timed_out.is_timeout)

        # 5. a send nobody answers raises SendTimeoutError (also a TimeoutError).
        try:
            planner.send("agent://fraud/scorer", {"score_order": 43}, timeout=0.1)
        except ok.errors.SendTimeoutError as error:
            print("no reply:", type(error).__name__)

        # 6. last value: retained by key, readable later by anyone in scope.
        keep = ok.PublishOptions(retain_as_last_value=True, last_value_key="orders.open")
        planner.publish("orders.status", {"open": 3}, options=keep)
        last = scorer.get_last_value("orders.open")
        print("last value:", last.json() if last else None)

        # 7. cancellation: every blocking call takes cancel=; a fired token raises CancelledError.
        token = ok.CancelToken()
        token.cancel()
        try:
            planner.wait_for(ok.WaitOnTopic("never"), ok.FOREVER, cancel=token)
        except ok.errors.CancelledError:
            print("cancelled: the wait ended at once")


if __name__ == "__main__":
    main()
