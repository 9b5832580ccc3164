-- Verdicts and scores settle their jobs once per statement on PostgreSQL (see its 0019). SQLite
-- runs its row triggers in process, without a round trip or a plan per call, so its verdicts
-- keep settling row by row (0001, 0015); this step changes nothing here.
SELECT 1;
