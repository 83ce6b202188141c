import pysqlite3 as sqlite3, sys, random, time
db = sys.argv[1]; nev = int(sys.argv[2])
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL"); c.execute("PRAGMA foreign_keys=ON")
c.execute("BEGIN")
c.execute("INSERT INTO accounts(id,name,created_at) VALUES('acc_1','a',0)")
for i in range(10):
    c.execute("INSERT INTO endpoints(id,account_id,url,secret,created_at,updated_at,max_in_flight) VALUES(?,?,?,?,0,0,64)", (f"ep_{i:022d}", 'acc_1', 'http://127.0.0.1/x', 's'))
c.execute("COMMIT")
payload = b'x'*1024
hdr = '{"content-type":"application/json","webhook-id":"evt_x","webhook-timestamp":"1764000000","webhook-signature":"v1,' + 'A'*44 + '"}'
t0=time.time(); ts = 1_764_000_000_000
for b in range(0, nev, 1000):
    c.execute("BEGIN")
    evs=[]; dls=[]; ats=[]
    for k in range(b, min(nev, b+1000)):
        at = ts + k
        eid = f"evt_{k:022d}"
        evs.append(('acc_1', eid, 'order.created', payload, at))
        for i in range(10):
            did = f"dlv_{at:013d}{i:02d}{random.getrandbits(40):012x}"[:30]
            dls.append((did,'acc_1',eid,f"ep_{i:022d}",'delivered',1,1,at,at+86400000,at,204,at,at,at))
            ats.append((did,1,at,1,hdr,204,'{}',b'', 'success', f"ep_{i:022d}"))
    c.executemany("INSERT INTO events(account_id,id,event_type,payload,created_at) VALUES(?,?,?,?,?)", evs)
    c.executemany("INSERT INTO deliveries(id,account_id,event_id,endpoint_id,state,attempts,attempt_seq,next_attempt_at,give_up_at,claimed_at,last_status,finished_at,created_at,updated_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)", dls)
    c.executemany("INSERT INTO attempts(delivery_id,attempt,started_at,duration_ms,request_headers,response_status,response_headers,response_body,classification,endpoint_id) VALUES(?,?,?,?,?,?,?,?,?,?)", ats)
    c.execute("COMMIT")
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
print("populated", nev, time.time()-t0)
