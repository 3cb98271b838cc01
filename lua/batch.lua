-- Several callers' calls of the operations above (`ops`, numbered as `scripts::merged` lists
-- them, each taking `nkeys[op]` keys) run as one script call: each with its own keys and
-- arguments, one after another, doing what it would do sent alone (with no other client's
-- command between them, and the server's memory checked once, before the first). A call that
-- fails (a redis.call error, WRONGTYPE among them) fails alone: its reply is its error, and
-- the calls after it still run.
-- KEYS[1..k]  every call's keys, call after call
-- ARGV        per call: its number of arguments times 16 plus its operation's number, then its
--             arguments
-- Reply:      an array of one reply per call, in order: the operation's reply (nil as nil),
--             or its error
local replies = {};
-- One table of keys and one of arguments for every call, refilled: no garbage per call.
local keys, args, had_keys, had_args = {}, {}, 0, 0;
local n, k, a, last = 0, 0, 1, #ARGV;
while a <= last do
    local code = tonumber(ARGV[a]);
    local op = code % 16;
    local nk, na = nkeys[op], (code - op) / 16;
    for i = 1, nk do
        keys[i] = KEYS[k + i];
    end;
    for i = nk + 1, had_keys do
        keys[i] = nil;
    end;
    for i = 1, na do
        args[i] = ARGV[a + i];
    end;
    for i = na + 1, had_args do
        args[i] = nil;
    end;
    had_keys, had_args = nk, na;
    k = k + nk;
    a = a + 1 + na;
    local ok, reply = pcall(ops[op], keys, args);
    n = n + 1;
    if not ok then
        -- Redis 7 raises a redis.call error as a table with `err`; 6.x as its message.
        if type(reply) == 'table' and reply.err ~= nil then
            reply = redis.error_reply(reply.err);
        else
            reply = redis.error_reply(tostring(reply));
        end;
    elseif reply == nil then
        -- A nil would end the array here: false is sent as nil.
        reply = false;
    end;
    replies[n] = reply;
end;
return replies;
