"""call_listener: a rebalance callback may be a function or a coroutine function, gets its own copy of the
partitions, and an exception it raises is handed back (logged), not raised into the rebalance."""

import asyncio

from replog.client.rebalance_listener import ConsumerRebalanceListener, call_listener

PARTITIONS = {("t", 0), ("t", 1)}


def test_a_plain_function_and_a_coroutine_function_are_both_called_with_a_copy():
    seen = []

    def plain(partitions):
        seen.append(("plain", partitions))
        partitions.clear()  # the caller's set is not the listener's to change

    async def coroutine(partitions):
        seen.append(("coroutine", partitions))

    given = set(PARTITIONS)
    assert asyncio.run(call_listener(plain, given, "assign")) is None
    assert asyncio.run(call_listener(coroutine, given, "assign")) is None
    assert given == PARTITIONS
    assert seen == [("plain", set()), ("coroutine", PARTITIONS)]


def test_an_exception_is_returned_and_logged(caplog):
    async def failing(partitions):
        raise RuntimeError("listener bug")

    error = asyncio.run(call_listener(failing, PARTITIONS, "revoke"))
    assert isinstance(error, RuntimeError) and str(error) == "listener bug"
    assert "rebalance listener revoke failed" in caplog.text


def test_the_base_listener_does_nothing():
    listener = ConsumerRebalanceListener()
    assert asyncio.run(call_listener(listener.on_partitions_revoked, PARTITIONS, "revoke")) is None
    assert asyncio.run(call_listener(listener.on_partitions_assigned, PARTITIONS, "assign")) is None
