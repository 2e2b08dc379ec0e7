"""The group coordinator (classic protocol) as a sans-IO core: group state, the rebalance rules, committed
offsets and the __consumer_offsets record formats. No sockets, files, clocks or timers inside; a shell in
broker/ feeds it requests and the time, and carries out the timers and log writes it returns."""
