"""The distributed tier (``docs/distributed.md``, ``docs/fleet-hub.md``): one host of a fleet
on RabbitMQ.

* the hub adapter: :mod:`~orkeon_actors.fleet.hub` (``AmqpEventHub``),
  :mod:`~orkeon_actors.fleet.gateway`, :mod:`~orkeon_actors.fleet.config`;
* its planes: :mod:`~orkeon_actors.fleet.signing`, :mod:`~orkeon_actors.fleet.roster`
  (presence), :mod:`~orkeon_actors.fleet.control` (spawn and stop requests);
* fleet operations: :mod:`~orkeon_actors.fleet.operations` (``rt.fleet``),
  :mod:`~orkeon_actors.fleet.dead_letters`, :mod:`~orkeon_actors.fleet.broker_admin`
  (policies and vhosts with ``rabbitmqctl``);
* the host-process harness of tests and benchmarks: :mod:`~orkeon_actors.fleet.host_process`
  and its child, :mod:`~orkeon_actors.fleet.host_main`.
"""
