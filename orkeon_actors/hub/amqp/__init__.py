"""The RabbitMQ side of the distributed hub: one broker link per process
(:mod:`~orkeon_actors.hub.amqp.link`) and the fleet's topology
(:mod:`~orkeon_actors.hub.amqp.topology`). The hub adapter built on them comes next.
"""
