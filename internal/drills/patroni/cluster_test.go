//go:build drills

package patroni_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acsledger/acsledger/internal/drills"
	"github.com/acsledger/acsledger/internal/pgtest"
)

// The cluster's timing. Patroni's defaults (ttl 30, loop_wait 10,
// retry_timeout 10) are for real networks; the drill's are the smallest
// that keep Patroni's rule loop_wait + 2*retry_timeout <= ttl, so that a
// failover takes seconds, not half a minute. primary_start_timeout 0
// fails over at once when the leader's PostgreSQL crashed, instead of
// restarting it in place for up to 5 minutes.
const (
	ttl          = 10
	loopWait     = 1
	retryTimeout = 3
)

// Cluster is an etcd and a Patroni cluster of PostgreSQL on loopback,
// with acsledger's database, logins and schema. Everything it started is
// killed and removed when the test ends, passed or not.
type Cluster struct {
	Nodes []*Node
	// DB is the database's name; Writer the service's login and
	// WriterPasswordFile a file holding its password.
	DB, Writer, WriterPasswordFile string

	dir, etcdURL string
	superPW      string
	etcd         *child
}

// Node is one Patroni member and the PostgreSQL it runs.
type Node struct {
	Name            string
	PGPort, APIPort int
	dir, data, conf string
	cred            *syscall.Credential
	patroni         *child
}

// child is a process the harness started, in its own process group.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// need returns the path of a program the cluster runs, failing t under
// CI=true and skipping it otherwise when it is missing.
func need(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI=true (.ci/run installs it): %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}

// start starts cmd in its own process group, killed with sig if the test
// process dies. As in pgtest, the child is started and waited for on a
// locked OS thread: Pdeathsig follows the thread that forked, not the
// process.
func start(t testing.TB, cmd *exec.Cmd, sig syscall.Signal, cred *syscall.Credential) *child {
	t.Helper()
	c := &child{cmd: cmd, done: make(chan struct{}), log: new(syncBuffer)}
	cmd.Stdout, cmd.Stderr = c.log, c.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig, Credential: cred}
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("couldn't start %s: %v", cmd.Path, err)
	}
	return c
}

// signal sends sig to the child's process group.
func (c *child) signal(sig syscall.Signal) { syscall.Kill(-c.cmd.Process.Pid, sig) }

// kill kills the child's process group and waits for the child.
func (c *child) kill() {
	c.signal(syscall.SIGCONT)
	c.signal(syscall.SIGKILL)
	<-c.done
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func secret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// NewCluster starts etcd and a two-node Patroni cluster, waits for a
// leader with a synchronous standby, runs deploy/postgres-init's roles
// script and `acsledger migrate` (as the owner) through the leader, and
// returns. It fails t within a few minutes if any of that does not come.
func NewCluster(t *testing.T, bin string) *Cluster {
	t.Helper()
	etcdBin, patroniBin := need(t, "etcd"), need(t, "patroni")
	psql := need(t, "psql")
	initdb, err := pgtest.Tool("initdb")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL is required under CI=true: %v", err)
		}
		t.Skip(err)
	}
	binDir := filepath.Dir(initdb)

	// PostgreSQL refuses to run as root: as root, Patroni and its
	// PostgreSQL run as the postgres user, which owns the directory.
	var cred *syscall.Credential
	dir, err := os.MkdirTemp("", "acsledger-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{dir: dir, superPW: secret(t), DB: "acsledger", Writer: "acsledger_writer"}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			n.kill()
		}
		if c.etcd != nil {
			c.etcd.kill()
		}
		if t.Failed() {
			c.dumpLogs(t)
		}
		os.RemoveAll(dir)
	})

	// etcd: one member, its data in the test's temporary directory.
	client, peer := freePort(t), freePort(t)
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	c.etcd = start(t, exec.Command(etcdBin, "--name", "drill", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", c.etcdURL, "--advertise-client-urls", c.etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "drill="+peerURL, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-level", "warn"), syscall.SIGKILL, nil)
	c.waitFor(t, time.Minute, "etcd healthy", func() bool {
		var h struct{ Health string }
		return getJSON(c.etcdURL+"/health", &h) == nil && h.Health == "true"
	})

	replPW := secret(t)
	for i := range 2 {
		n := &Node{Name: fmt.Sprintf("node%d", i+1), PGPort: freePort(t), APIPort: freePort(t), cred: cred}
		n.dir = filepath.Join(dir, n.Name)
		n.data = filepath.Join(n.dir, "data")
		n.conf = filepath.Join(n.dir, "patroni.yml")
		if err := os.Mkdir(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if cred != nil {
			os.Chown(n.dir, int(cred.Uid), int(cred.Gid))
		}
		// YAML is a superset of JSON: the configuration is written as JSON.
		conf, err := json.MarshalIndent(c.patroniConf(n, binDir, replPW), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.conf, conf, 0o600); err != nil {
			t.Fatal(err)
		}
		if cred != nil {
			os.Chown(n.conf, int(cred.Uid), int(cred.Gid))
		}
		c.Nodes = append(c.Nodes, n)
	}

	// The first node bootstraps (initdb) and leads; the second clones it
	// with pg_basebackup and becomes its synchronous standby.
	c.Nodes[0].Start(t, patroniBin)
	leader := c.WaitLeader(t, 2*time.Minute)
	c.Nodes[1].Start(t, patroniBin)
	c.WaitSync(t, leader, 2*time.Minute)

	// The logins and the database, by the script docker-compose runs.
	owner := secret(t)
	writer := secret(t)
	roles := exec.Command("sh", "../../../deploy/postgres-init/10-acsledger-roles.sh")
	roles.Env = append(os.Environ(), "PATH="+filepath.Dir(psql)+":"+os.Getenv("PATH"),
		"PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(leader.PGPort), "PGPASSWORD="+c.superPW, "POSTGRES_USER=postgres",
		"ACSLEDGER_OWNER_PASSWORD="+owner, "ACSLEDGER_WRITER_PASSWORD="+writer)
	if out, err := roles.CombinedOutput(); err != nil {
		t.Fatalf("roles script on the leader: %v\n%s", err, out)
	}
	ownerFile := filepath.Join(t.TempDir(), "owner-password")
	c.WriterPasswordFile = filepath.Join(t.TempDir(), "writer-password")
	if err := os.WriteFile(ownerFile, []byte(owner+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.WriterPasswordFile, []byte(writer+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	drills.Run(t, bin, "migrate", "--db", c.URL("acsledger_owner", leader), "--db-password-file", ownerFile)
	return c
}

// patroniConf is one member's patroni.yml (docs/operations.md, "Patroni",
// shows the same for real hosts).
func (c *Cluster) patroniConf(n *Node, binDir, replPW string) map[string]any {
	addr := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	return map[string]any{
		"scope":     "acsledger",
		"namespace": "/service/",
		"name":      n.Name,
		"log":       map[string]any{"level": "INFO"},
		"restapi":   map[string]any{"listen": addr(n.APIPort), "connect_address": addr(n.APIPort)},
		"etcd3":     map[string]any{"hosts": strings.TrimPrefix(c.etcdURL, "http://")},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl": ttl, "loop_wait": loopWait, "retry_timeout": retryTimeout,
				"maximum_lag_on_failover": 1 << 20,
				"primary_start_timeout":   0,
				"synchronous_mode":        true,
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"parameters": map[string]any{
						"wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on",
						"max_wal_senders": 10, "max_replication_slots": 10, "max_connections": 200,
						"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on",
					},
				},
			},
			"initdb": []any{map[string]any{"encoding": "UTF8"}, map[string]any{"locale": "C"}},
			"pg_hba": []string{
				"host replication replicator 127.0.0.1/32 scram-sha-256",
				"host all all 127.0.0.1/32 scram-sha-256",
			},
		},
		"postgresql": map[string]any{
			"listen": addr(n.PGPort), "connect_address": addr(n.PGPort),
			"data_dir": n.data, "bin_dir": binDir,
			"pgpass": filepath.Join(n.dir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]any{"username": "postgres", "password": c.superPW},
				"replication": map[string]any{"username": "replicator", "password": replPW},
				"rewind":      map[string]any{"username": "postgres", "password": c.superPW},
			},
			"parameters": map[string]any{"unix_socket_directories": n.dir},
		},
	}
}

// Start starts the member's Patroni, as the postgres user when the test
// runs as root. If the test process dies, Patroni gets SIGTERM and stops
// its PostgreSQL.
func (n *Node) Start(t testing.TB, patroniBin string) {
	t.Helper()
	cmd := exec.Command(patroniBin, n.conf)
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "HOME="+n.dir)
	n.patroni = start(t, cmd, syscall.SIGTERM, n.cred)
}

// PatroniRunning reports whether the member's Patroni process runs.
func (n *Node) PatroniRunning() bool {
	if n.patroni == nil {
		return false
	}
	select {
	case <-n.patroni.done:
		return false
	default:
		return true
	}
}

// StopPatroni stops the member's Patroni with SIGTERM, as `systemctl stop
// patroni` does: Patroni shuts its PostgreSQL down and gives up the
// leader key. It returns once Patroni has exited.
func (n *Node) StopPatroni(t testing.TB) {
	t.Helper()
	n.patroni.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.patroni.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: Patroni still runs a minute after SIGTERM\n%s", n.Name, n.patroni.log)
	}
}

// Postmaster returns the pid of the member's running postmaster, 0 if
// none runs. Patroni starts PostgreSQL in a session of its own, so the
// postmaster also leads the process group of its backends.
func (n *Node) Postmaster() int {
	b, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || !alive(pid) {
		return 0
	}
	return pid
}

// alive reports whether pid is a process that has not exited (a zombie
// has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// KillPostgres sends SIGKILL to the member's postmaster, as when the
// server process crashes, and returns its pid once it has exited.
func (n *Node) KillPostgres(t testing.TB) int {
	t.Helper()
	pid := n.Postmaster()
	if pid == 0 {
		t.Fatalf("%s: no postmaster runs", n.Name)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	drills.WaitFor(t, 30*time.Second, 10*time.Millisecond, n.Name+"'s postmaster gone after SIGKILL", func() bool { return !alive(pid) })
	return pid
}

// kill kills Patroni and PostgreSQL and waits until both are gone.
func (n *Node) kill() {
	if pid := n.Postmaster(); pid != 0 {
		syscall.Kill(-pid, syscall.SIGCONT)
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
		for deadline := time.Now().Add(30 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if n.patroni != nil {
		n.patroni.kill()
	}
}

// Member is a member as Patroni's /cluster reports it.
type Member struct {
	Name     string `json:"name"`
	Role     string `json:"role"` // leader, sync_standby, replica
	State    string `json:"state"`
	Port     int    `json:"port"`
	Timeline int    `json:"timeline"`
}

// Members asks any member's REST API for the cluster's members.
func (c *Cluster) Members() ([]Member, error) {
	var errs []error
	for _, n := range c.Nodes {
		if !n.PatroniRunning() {
			continue
		}
		var cl struct{ Members []Member }
		err := getJSON(fmt.Sprintf("http://127.0.0.1:%d/cluster", n.APIPort), &cl)
		if err == nil {
			return cl.Members, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("no Patroni REST API answered: %w", errors.Join(errs...))
}

// Node returns the node named name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitLeader waits until a member leads and its PostgreSQL takes writes,
// and returns it.
func (c *Cluster) WaitLeader(t testing.TB, d time.Duration) *Node {
	t.Helper()
	var leader *Node
	c.waitFor(t, d, "a leader taking writes", func() bool {
		ms, err := c.Members()
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.Role == "leader" && m.State == "running" {
				n := c.Node(m.Name)
				if n != nil && n.Writable(c) {
					leader = n
					return true
				}
			}
		}
		return false
	})
	return leader
}

// WaitSync waits until leader's PostgreSQL reports a standby streaming
// synchronously (pg_stat_replication.sync_state = 'sync') and Patroni
// names it sync_standby, and returns the standby.
func (c *Cluster) WaitSync(t testing.TB, leader *Node, d time.Duration) *Node {
	t.Helper()
	var sync *Node
	c.waitFor(t, d, "a synchronous standby", func() bool {
		ms, err := c.Members()
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.Role != "sync_standby" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, c.superURL(leader, "postgres"))
			if err != nil {
				return false
			}
			defer conn.Close(context.Background())
			var state string
			if conn.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'", m.Name).Scan(&state) == nil && state == "sync" {
				sync = c.Node(m.Name)
				return true
			}
		}
		return false
	})
	return sync
}

// Writable reports whether the node's PostgreSQL answers and is not in
// recovery.
func (n *Node) Writable(c *Cluster) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.superURL(n, "postgres"))
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var standby bool
	return conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby) == nil && !standby
}

// InRecovery reports whether the node's PostgreSQL answers and is a
// standby.
func (n *Node) InRecovery(c *Cluster) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.superURL(n, "postgres"))
	if err != nil {
		return false
	}
	defer conn.Close(context.Background())
	var standby bool
	return conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby) == nil && standby
}

// superURL is the superuser's URL of db on n, for the drill's own checks.
func (c *Cluster) superURL(n *Node, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", c.superPW), Host: "127.0.0.1:" + strconv.Itoa(n.PGPort),
		Path: "/" + db, RawQuery: "sslmode=disable&connect_timeout=5"}
	return u.String()
}

// Count runs a query returning one number on acsledger's database on n,
// as the superuser.
func (c *Cluster) Count(n *Node, query string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.superURL(n, c.DB))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var v int64
	err = conn.QueryRow(ctx, query).Scan(&v)
	return v, err
}

// URL is the URL of acsledger's database for login user on nodes (every
// node when none is given), without a password: the commands read it
// from a file. Several nodes make a multi-host URL whose writable host
// every new connection looks for.
func (c *Cluster) URL(user string, nodes ...*Node) string {
	if len(nodes) == 0 {
		nodes = c.Nodes
	}
	hosts := make([]string, len(nodes))
	for i, n := range nodes {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(n.PGPort)
	}
	q := "sslmode=disable&connect_timeout=5"
	if len(nodes) > 1 {
		q = "target_session_attrs=read-write&" + q
	}
	return "postgres://" + user + "@" + strings.Join(hosts, ",") + "/" + c.DB + "?" + q
}

func (c *Cluster) dumpLogs(t testing.TB) {
	for _, n := range c.Nodes {
		if n.patroni != nil {
			t.Logf("--- %s's Patroni and PostgreSQL:\n%s", n.Name, tail(n.patroni.log.String(), 12000))
		}
	}
	if c.etcd != nil {
		t.Logf("--- etcd:\n%s", tail(c.etcd.log.String(), 4000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func (c *Cluster) waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	drills.WaitFor(t, d, 50*time.Millisecond, what, cond)
}

var restClient = &http.Client{Timeout: 3 * time.Second}

func getJSON(u string, v any) error {
	resp, err := restClient.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
