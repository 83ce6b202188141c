import pysqlite3 as sqlite3, sys, random, os, shutil
# frames.py base.db [index to drop ...]: WAL frames an ingest tx and a results tx write, x10
src=sys.argv[1]; drops=sys.argv[2:]
db=src + '.frames'
for s in ('','-wal','-shm'):
    if os.path.exists(db+s): os.remove(db+s)
shutil.copy(src, db)
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL"); c.execute("PRAGMA foreign_keys=ON")
c.execute("PRAGMA wal_autocheckpoint=0")
for d in drops: c.execute(f"DROP INDEX {d}")
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
payload=b'y'*1024
hdr = '{"content-type":"application/json","webhook-id":"evt_x","webhook-timestamp":"1764000000","webhook-signature":"v1,' + 'A'*44 + '"}'
k0 = c.execute("select count(*) from events").fetchone()[0]
ts=1_764_000_000_000 + k0
eps=[f"ep_{i:022d}" for i in range(10)]
ins = "INSERT INTO deliveries(id,account_id,event_id,endpoint_id,state,next_attempt_at,give_up_at,created_at,updated_at) VALUES " + ",".join(["(?,?,?,?,'pending',?,?,?,?)"]*10)
lease = "UPDATE deliveries SET state='in_flight', lease_until=?, claim_token='t', claimed_at=?, attempts=attempts+1, attempt_seq=attempt_seq+1, updated_at=? WHERE id IN (" + ",".join("?"*10) + ")"
done = "UPDATE deliveries SET state='delivered', lease_until=NULL, claim_token=NULL, finished_at=?, last_status=204, updated_at=? WHERE id IN (" + ",".join("?"*10) + ")"
att = "INSERT INTO attempts(delivery_id,attempt,started_at,duration_ms,request_headers,response_status,response_headers,response_body,classification,endpoint_id) VALUES " + ",".join(["(?,1,?,1,?,204,'{}',x'','success',?)"]*10)
health = "UPDATE endpoints SET last_success_at=?, updated_at=? WHERE id IN (" + ",".join("?"*10) + ")"
def frames(): return os.path.getsize(db+'-wal')//4120 if os.path.exists(db+'-wal') else 0
fi=[];fr=[]
for j in range(200):
    at=ts+j; eid=f"evt_{k0+j:022d}"
    dids=[f"dlv_{at:013d}{i:02d}{random.getrandbits(40):012x}"[:30] for i in range(10)]
    f0=frames()
    c.execute("BEGIN IMMEDIATE")
    c.execute("INSERT INTO events(account_id,id,event_type,payload,created_at) VALUES(?,?,?,?,?)", ('acc_1',eid,'order.created',payload,at))
    args=[]
    for i in range(10): args += [dids[i],'acc_1',eid,eps[i],at,at+86400000,at,at]
    c.execute(ins,args)
    c.execute(lease,[at+30000,at,at]+dids)
    c.execute("COMMIT")
    f1=frames()
    c.execute("BEGIN IMMEDIATE")
    c.execute(done,[at+1,at+1]+dids)
    args=[]
    for i in range(10): args += [dids[i],at,hdr,eps[i]]
    c.execute(att,args)
    c.execute(health,[at+1,at+1]+eps)
    c.execute("COMMIT")
    f2=frames()
    if j>=100: fi.append(f1-f0); fr.append(f2-f1)
print(' '.join(drops) or 'all', 'ingest frames', sum(fi)/len(fi), 'results frames', sum(fr)/len(fr))
