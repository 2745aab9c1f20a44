"""The distributed tier's planes: signing (presence and control come next).

See :mod:`orkeon_actors.fleet.signing`.
"""
