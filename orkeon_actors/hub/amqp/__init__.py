"""The RabbitMQ side of the distributed hub: one broker link per process
(:mod:`~orkeon_actors.hub.amqp.link`), the fleet's topology
(:mod:`~orkeon_actors.hub.amqp.topology`) and broker URIs
(:mod:`~orkeon_actors.hub.amqp.uri`). The hub adapter built on them is
:class:`orkeon_actors.fleet.hub.AmqpEventHub`; its envelope is :mod:`orkeon_actors.wire.amqp`.
"""
