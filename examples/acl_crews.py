"""Two crews across a YAML ACL: what one crew's links: allow, and what the ACL refuses.

Each crew declares in YAML who it may talk to (spec §10). The restrictive policy refuses
every inter-crew message no link allows, with a typed EventAclError saying which rule.

Run: python examples/acl_crews.py
"""

from __future__ import annotations

import orkeon_actors as ok
from orkeon_actors.acl import AclMiddleware, AclRegistry, RestrictiveCrewLinkPolicy

BILLING = """
name: billing-crew
agents: [{id: scorer}]
links:
  - to: fraud-crew               # billing may ask fraud to check, and hear the result
    direction: bidirectional
    allowed_topics: [fraud.check, fraud.result]
"""

FRAUD = """
name: fraud-crew
agents: [{id: analyst}]
links:
  - to: billing-crew
    direction: bidirectional
    allowed_topics: [fraud.check, fraud.result]
"""

MARKETING = """
name: marketing-crew
agents: [{id: writer}]
links: []                        # declared and empty: this crew talks to nobody
"""


def main() -> None:
    registry = AclRegistry()
    billing = registry.register_crew_yaml(BILLING)  # a str is YAML text; a Path is a file
    fraud = registry.register_crew_yaml(FRAUD)
    marketing = registry.register_crew_yaml(MARKETING)

    acl = AclMiddleware(RestrictiveCrewLinkPolicy(registry))
    with ok.Runtime.start(middleware=[acl]) as rt:
        hub = rt.hub
        analyst = hub.bind(fraud, "analyst")
        scorer = hub.bind(billing, "scorer")
        with analyst.subscribe("fraud.check") as checks:
            # Allowed: billing -> fraud on fraud.check, scoped to the fraud crew.
            scorer.publish("fraud.check", {"invoice": 7}, options=ok.PublishOptions(target_crew_id=fraud))
            print("fraud received:", [m.json() for m in checks.drain()])

        # Refused: marketing declared no links at all.
        try:
            hub.bind(marketing, "writer").publish(
                "fraud.check", {"invoice": 8}, options=ok.PublishOptions(target_crew_id=fraud)
            )
        except ok.errors.EventAclError as refused:
            print("refused:", refused.rule, "|", refused)

        # Refused: a topic the link does not list.
        try:
            scorer.publish("fraud.gossip", {"x": 1}, options=ok.PublishOptions(target_crew_id=fraud))
        except ok.errors.EventAclError as refused:
            print("refused:", refused.rule, "|", refused)


if __name__ == "__main__":
    main()
