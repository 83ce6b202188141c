import pysqlite3 as sqlite3, sys, random, time, statistics, os
db = sys.argv[1]; variants = [int(x) for x in sys.argv[2].split(',')]; rounds=int(sys.argv[3]); n=int(sys.argv[4])
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL"); c.execute("PRAGMA foreign_keys=ON")
payload = b'y'*1024
hdr = '{"content-type":"application/json","webhook-id":"evt_x","webhook-timestamp":"1764000000","webhook-signature":"v1,' + 'A'*44 + '"}'
k0 = c.execute("select count(*) from events").fetchone()[0]
ts = 1_764_000_000_000 + k0
eps = [f"ep_{i:022d}" for i in range(10)]
ins = "INSERT INTO deliveries(id,account_id,event_id,endpoint_id,state,next_attempt_at,give_up_at,created_at,updated_at) VALUES " + ",".join(["(?,?,?,?,'pending',?,?,?,?)"]*10)
lease = "UPDATE deliveries SET state='in_flight', lease_until=?, claim_token='t', claimed_at=?, attempts=attempts+1, attempt_seq=attempt_seq+1, updated_at=? WHERE id IN (" + ",".join("?"*10) + ")"
done = "UPDATE deliveries SET state='delivered', lease_until=NULL, claim_token=NULL, finished_at=?, last_status=204, updated_at=? WHERE id IN (" + ",".join("?"*10) + ")"
att = "INSERT INTO attempts(delivery_id,attempt,started_at,duration_ms,request_headers,response_status,response_headers,response_body,classification,endpoint_id) VALUES " + ",".join(["(?,1,?,1,?,204,'{}',x'','success',?)"]*10)
health = "UPDATE endpoints SET last_success_at=?, updated_at=? WHERE id IN (" + ",".join("?"*10) + ")"
k = k0
res = {v: {'ing':[], 'res':[], 'all':[]} for v in variants}
def walpages():
    return os.path.getsize(db+'-wal')//4104 if os.path.exists(db+'-wal') else 0
for r in range(rounds):
    for v in (variants if r%2==0 else variants[::-1]):
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.execute(f"PRAGMA wal_autocheckpoint={v}")
        ti=[]; tr=[]
        t00=time.perf_counter()
        for j in range(n):
            at = ts + k; k += 1
            eid = f"evt_{k:022d}"
            dids = [f"dlv_{at:013d}{i:02d}{random.getrandbits(40):012x}"[:30] for i in range(10)]
            t0=time.perf_counter()
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO events(account_id,id,event_type,payload,created_at) VALUES(?,?,?,?,?)", ('acc_1',eid,'order.created',payload,at))
            args=[]
            for i in range(10): args += [dids[i],'acc_1',eid,eps[i],at,at+86400000,at,at]
            c.execute(ins, args)
            c.execute(lease, [at+30000, at, at] + dids)
            c.execute("COMMIT")
            t1=time.perf_counter()
            c.execute("BEGIN IMMEDIATE")
            c.execute(done, [at+1, at+1] + dids)
            args=[]
            for i in range(10): args += [dids[i], at, hdr, eps[i]]
            c.execute(att, args)
            c.execute(health, [at+1, at+1] + eps)
            c.execute("COMMIT")
            t2=time.perf_counter()
            ti.append((t1-t0)*1e6); tr.append((t2-t1)*1e6)
        tall=(time.perf_counter()-t00)/n/10*1e6
        res[v]['ing'].append(statistics.mean(ti)); res[v]['res'].append(statistics.mean(tr)); res[v]['all'].append(tall)
        slow=[t for t in ti+tr if t>1000]
        print(f"round {r} ckpt {v}: ingest mean {statistics.mean(ti):.0f} p50 {statistics.median(ti):.0f} p99 {sorted(ti)[int(len(ti)*.99)]:.0f} · results mean {statistics.mean(tr):.0f} p50 {statistics.median(tr):.0f} · {tall:.1f} us/delivery · {len(slow)} txs over 1 ms, {sum(slow)/1000:.0f} ms", flush=True)
for v in variants:
    print(v, {x: [round(y,1) for y in res[v][x]] for x in res[v]})
