import pysqlite3 as sqlite3, glob, os, sys
db = sys.argv[1]
c = sqlite3.connect(db, isolation_level=None)
c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA foreign_keys=ON")
for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../migrations/sqlite/*.sql'))):
    c.executescript(open(f).read())
for r in c.execute("select sql from sqlite_schema where name in ('accounts','endpoints','events','attempts','platforms')"):
    print(r[0])
