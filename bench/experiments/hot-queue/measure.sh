#!/bin/bash
# usage: measure.sh burn_file
P="psql -q -X -h 127.0.0.1 -U postgres test"
$P -c "CHECKPOINT" 
w0=$($P -At -c "select pg_current_wal_lsn()")
t0=$(date +%s.%N)
$P -c "SET search_path=exp" -c "CALL burn()"
t1=$(date +%s.%N)
w1=$($P -At -c "select pg_current_wal_lsn()")
$P -At -c "select 'wal bytes per delivery', pg_wal_lsn_diff('$w1','$w0')/50000.0"
echo "seconds $(echo "$t1 - $t0" | bc)"
$P -At -c "select relname, n_tup_upd, n_tup_hot_upd, n_tup_del from pg_stat_user_tables where schemaname='exp' and relname in ('deliveries','queue','endpoints','rate_windows','pending_deliveries','in_flight_deliveries','finished_deliveries')"
$P -At -c "select count(*), state from exp.deliveries group by state"
