"""An LLM-style agent loop through the seven tools, with a fake model.

A real model receives ``tools.definitions()`` and answers with tool calls (a name and
JSON arguments); the program runs each call with ``tools.invoke`` and feeds the result
back. Here a scripted "model" plays that role so the loop runs offline, deterministically.

Run: python examples/tools_loop.py
"""

from __future__ import annotations

import json
import threading

import orkeon_actors as ok

# What the model would answer, turn by turn: (tool name, arguments as a JSON string).
SCRIPT = [
    (
        "publish_event",
        {
            "topic": "orders.created",
            "payload": {"order": 7},
            "retain_as_last_value": True,
            "last_value_key": "orders.latest",
        },
    ),
    ("post_message", {"target_mailbox": "agent://billing/clerk", "payload": {"invoice": 7}}),
    ("send_request", {"target_mailbox": "agent://fraud/scorer", "payload": {"score": 7}, "timeout_ms": 5000}),
    ("get_last_value", {"key": "orders.latest", "crew_scope": "_global"}),  # a global publish: global slot
    ("wait_for_event", {"topic": "orders.shipped", "timeout_ms": 100}),  # nobody publishes: a timeout result
    ("post_message", {"target_mailbox": "agent://nobody/here", "payload": {}}),  # a refused call: an error result
]


def scorer(hub: ok.EventHub) -> None:
    """Another agent using the tools too: it answers one request with reply_to."""
    tools = ok.tools.EventHubTools(hub.bind("fraud", "scorer"))
    request = tools.invoke("receive_message", {"timeout_ms": 5000})
    tools.invoke("reply_to", {"correlation_id": request["message"]["correlation_id"], "payload": {"risk": "low"}})
    tools.close()


def main() -> None:
    with ok.Runtime.start() as rt:
        rt.hub.register_mailbox("agent://billing/clerk")
        rt.hub.register_mailbox("agent://fraud/scorer")
        helper = threading.Thread(target=scorer, args=(rt.hub,))
        helper.start()

        # A budget bounds the loop: every blocking tool call is cancelled when it runs out.
        budget = ok.Budget(max_tool_calls=20, clock=rt.clock)
        tools = ok.tools.EventHubTools(rt.hub.bind("orders", "planner"), cancel=budget.token)
        print("tools offered to the model:", [d["name"] for d in tools.definitions()])

        for name, arguments in SCRIPT:
            # errors="result": a refused call comes back as {"error": {...}} for the model to read,
            # instead of raising; an agent's tool call is untrusted input.
            result = tools.invoke(name, json.dumps(arguments), errors="result")
            budget.consume(tool_calls=1)  # what a model adapter records per call
            print(f"{name:>15} -> {json.dumps(result)[:110]}")
        tools.close()
        helper.join()


if __name__ == "__main__":
    main()
