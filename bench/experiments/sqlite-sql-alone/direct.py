import pysqlite3 as sqlite3, sys, random, os, shutil, time, statistics
# direct.py base.db rounds n [gap_s]: ingest x10 as insert-pending + lease UPDATE (a) vs insert in_flight (b), alternating; gap_s sleeps between an event and its results, as at low load
src=sys.argv[1]; rounds=int(sys.argv[2]); n=int(sys.argv[3]); gap=float(sys.argv[4]) if len(sys.argv)>4 else 0
db=src + '.direct'
for s in ('','-wal','-shm'):
    if os.path.exists(db+s): os.remove(db+s)
shutil.copy(src, db)
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL"); c.execute("PRAGMA foreign_keys=ON")
c.execute("PRAGMA wal_autocheckpoint=20000")
payload=b'y'*1024
k0 = c.execute("select count(*) from events").fetchone()[0]
ts=1_764_000_000_000 + k0
eps=[f"ep_{i:022d}" for i in range(10)]
ins = "INSERT INTO deliveries(id,account_id,event_id,endpoint_id,state,next_attempt_at,give_up_at,created_at,updated_at) VALUES " + ",".join(["(?,?,?,?,'pending',?,?,?,?)"]*10)
insf = "INSERT INTO deliveries(id,account_id,event_id,endpoint_id,state,next_attempt_at,give_up_at,created_at,updated_at,claimed_at,lease_until,claim_token) VALUES " + ",".join(["(?,?,?,?,'in_flight',?,?,?,?,?,?,'t')"]*10)
lease = "UPDATE deliveries SET state='in_flight', claimed_at=?1, lease_until=?2, claim_token='t', updated_at=?1 WHERE id IN (" + " UNION ALL ".join(f"SELECT id FROM (SELECT id FROM deliveries WHERE endpoint_id=?{3+k} AND state='pending' AND next_attempt_at<=?1 ORDER BY next_attempt_at, id LIMIT 11)" for k in range(10)) + ") RETURNING *"
done = "UPDATE deliveries SET state='delivered', lease_until=NULL, claim_token=NULL, finished_at=?, last_status=204, updated_at=? WHERE id IN (" + ",".join("?"*10) + ")"
k=0
res={'a':[], 'b':[]}
fr={'a':[], 'b':[]}
def frames(): return os.path.getsize(db+'-wal')//4120 if os.path.exists(db+'-wal') else 0
for r in range(rounds):
    for v in ('ab' if r%2==0 else 'ba'):
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        t=[]; f=[]
        for j in range(n):
            at=ts+k; eid=f"evt_{k0+k:022d}"; k+=1
            dids=[f"dlv_{at:013d}{i:02d}{random.getrandbits(40):012x}"[:30] for i in range(10)]
            f0=frames(); t0=time.perf_counter()
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO events(account_id,id,event_type,payload,created_at) VALUES(?,?,?,?,?)", ('acc_1',eid,'order.created',payload,at))
            args=[]
            if v=='a':
                for i in range(10): args += [dids[i],'acc_1',eid,eps[i],at,at+86400000,at,at]
                c.execute(ins,args)
                rows=c.execute(lease,[at,at+30000]+eps).fetchall()
                assert len(rows)==10
            else:
                for i in range(10): args += [dids[i],'acc_1',eid,eps[i],at,at+86400000,at,at,at,at+30000]
                c.execute(insf,args)
            c.execute("COMMIT")
            t.append((time.perf_counter()-t0)*1e6); f.append(frames()-f0)
            if gap: time.sleep(gap)
            c.execute("BEGIN IMMEDIATE"); c.execute(done,[at+1,at+1]+dids); c.execute("COMMIT")
        res[v].append(statistics.median(t)); fr[v].append(statistics.mean(f))
        print(r, v, 'ingest p50 %.0f mean %.0f us, frames %.1f' % (statistics.median(t), statistics.mean(t), statistics.mean(f)), flush=True)
print({v:[round(x) for x in res[v]] for v in res})
