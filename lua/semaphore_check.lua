-- Check that many semaphores are still the generation their permits were taken in (the
-- watchdog's batch for plain semaphore guards: they have no lease, so nothing is renewed).
-- KEYS[i]      generation "redlatch_semaphore:{name}" of semaphore i
-- ARGV[1]      lease in milliseconds (unused: the watchdog sends it to every batch)
-- ARGV[i+1]    the generation the guard's permits were taken in
-- Reply:       array of one integer per guard: 1 = still that generation; 0 = not (the
--              semaphore was lost with the server's data, expired, or was set up anew): its
--              guard is marked lost, and its release will be dropped
local res = {};
for i, key in ipairs(KEYS) do
    -- pcall: a foreign key reports 0 for its guard, not an error for the whole batch.
    local generation = redis.pcall('get', key);
    res[i] = 0;
    if generation == ARGV[i + 1] then
        res[i] = 1;
    end;
end;
return res;
