-- Record that an owner waits (ours, not Redisson's): in a lock's wait records
-- "redlatch_waits:{name}", or in its client's index "redlatch_waiting:{client}" (see
-- src/keys.rs). The value is "<expires> <since> <what>": ms on the server's clock, then the
-- wait's mode (a record) or the lock's key (the index). A record that exists keeps its since.
-- KEYS[1]  the HASH
-- ARGV[1]  the owner id
-- ARGV[2]  lease in ms: the record is dead once it passes unrenewed
-- ARGV[3]  how long the owner has waited already, in ms (since = now - this)
-- ARGV[4]  the mode letter, or the lock's key
-- Reply:   since, in ms on the server's clock
--          error WRONGTYPE  the key exists and is not a hash
local now = clock_ms();
local lease = tonumber(ARGV[2]);
local since = now - tonumber(ARGV[3]);
local old = redis.call('hget', KEYS[1], ARGV[1]);
if old then
    local _, _, was = string.find(old, '^%d+ (%d+) ');
    if was then
        since = tonumber(was);
    end;
end;
redis.call('hset', KEYS[1], ARGV[1], string.format('%d %d ', now + lease, since) .. ARGV[4]);
if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease);
end;
return since;
