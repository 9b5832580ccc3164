package harness

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is the processor time a timed part used: this process's (the side under test, the fake
// model and, on SQLite, the database engine) and, on PostgreSQL, that of the server backends
// connected to the side's own database. On a shared machine, CPU per job is steadier than jobs
// per second.
type CPU struct {
	Self time.Duration
	DB   time.Duration
}

// Total is Self + DB.
func (c CPU) Total() time.Duration { return c.Self + c.DB }

// MeasureCPU starts measuring; the returned func stops and returns what was used. where is the
// side's database (a postgres:// URL; ignored on SQLite).
func MeasureCPU(ctx context.Context, dialect, where string) func() CPU {
	self0 := selfCPU()
	var db *sql.DB
	var start map[int]time.Duration
	if dialect == Postgres {
		var err error
		if db, err = sql.Open("pgx", where); err == nil {
			db.SetMaxOpenConns(1)
			start = backendCPU(ctx, db)
		}
	}
	return func() CPU {
		c := CPU{Self: selfCPU() - self0}
		if db != nil {
			for pid, t := range backendCPU(ctx, db) {
				c.DB += t - start[pid] // a backend that connected meanwhile counts whole
			}
			db.Close()
		}
		return c
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU reads the CPU time of every backend connected to db's database but the asking one
// (the server must be on this machine).
func backendCPU(ctx context.Context, db *sql.DB) map[int]time.Duration {
	out := map[int]time.Duration{}
	rows, err := db.QueryContext(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			continue
		}
		if t, err := procCPU(pid); err == nil {
			out[pid] = t
		}
	}
	return out
}

// procCPU is utime + stime of a process, from /proc/PID/stat (clock ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad stat")
	}
	f := strings.Fields(s[i+1:])
	// After the command: state(0) ppid(1) … utime(11) stime(12).
	if len(f) < 13 {
		return 0, fmt.Errorf("bad stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad stat")
	}
	return time.Duration(u+st) * 10 * time.Millisecond, nil
}
