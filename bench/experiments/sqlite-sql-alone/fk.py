import pysqlite3 as sqlite3, time
c = sqlite3.connect('fk.db', isolation_level=None)
c.execute("PRAGMA foreign_keys=ON")
def t(label):
    c.execute("INSERT INTO endpoints(id,account_id,url,secret,created_at,updated_at) VALUES('ep_new','acc_1','u','s',0,0)")
    t0=time.perf_counter(); c.execute("DELETE FROM endpoints WHERE id='ep_new'"); print(label, round((time.perf_counter()-t0)*1000,2), 'ms')
t('full index'); t('full index')
c.execute("DROP INDEX deliveries_endpoint_created")
c.execute("CREATE INDEX deliveries_endpoint_created ON deliveries (endpoint_id, created_at, event_id) WHERE finished_at IS NOT NULL")
t('partial'); t('partial')
