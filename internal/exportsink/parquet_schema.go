package exportsink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger/export"
)

// The Parquet schema of an OCSF event class (docs/export.md, "Parquet for
// security lakes"): the base event attributes every class shares as typed
// columns, metadata and actor as nested groups, the evidence handle as the
// group acsledger (as in unmapped.acsledger), the objects of the class as
// JSON columns, and the whole event as the JSON column event, so nothing
// of it is lost. One Go type per class keeps a file's columns to its
// class; a class this table does not know gets the base columns only.

// ocsfBase holds the columns every class has.
type ocsfBase struct {
	ClassUID     int32        `parquet:"class_uid"`
	ClassName    string       `parquet:"class_name,dict"`
	CategoryUID  int32        `parquet:"category_uid"`
	CategoryName string       `parquet:"category_name,dict"`
	ActivityID   int32        `parquet:"activity_id"`
	ActivityName string       `parquet:"activity_name,optional,dict"`
	TypeUID      int64        `parquet:"type_uid"`
	TypeName     string       `parquet:"type_name,optional,dict"`
	SeverityID   int32        `parquet:"severity_id"`
	Severity     string       `parquet:"severity,optional,dict"`
	StatusID     *int32       `parquet:"status_id,optional"`
	Status       string       `parquet:"status,optional,dict"`
	Time         int64        `parquet:"time,timestamp(millisecond)"`
	Message      string       `parquet:"message,optional"`
	Metadata     ocsfMetadata `parquet:"metadata"`
	Actor        ocsfActor    `parquet:"actor"`
	Enrichments  string       `parquet:"enrichments,optional,json"`
	// AttestationList is OCSF 1.9's record_integrity attestation.
	AttestationList string     `parquet:"attestation_list,optional,json"`
	Unmapped        string     `parquet:"unmapped,optional,json"`
	Acsledger       handleCols `parquet:"acsledger"`
	Event           string     `parquet:"event,json"`
}

type ocsfMetadata struct {
	Version        string      `parquet:"version,dict"`
	Product        ocsfProduct `parquet:"product"`
	UID            string      `parquet:"uid,optional"`
	CorrelationUID string      `parquet:"correlation_uid,optional"`
	LogName        string      `parquet:"log_name,optional,dict"`
	OriginalTime   string      `parquet:"original_time,optional"`
	Profiles       []string    `parquet:"profiles,list"`
}

type ocsfProduct struct {
	Name       string `parquet:"name,optional,dict"`
	VendorName string `parquet:"vendor_name,optional,dict"`
	Version    string `parquet:"version,optional,dict"`
}

// ocsfActor is OCSF's actor as acs/trace writes it: the agent as a user,
// and its session.
type ocsfActor struct {
	User    ocsfUser    `parquet:"user"`
	Session ocsfSession `parquet:"session"`
}

type ocsfUser struct {
	UID    string `parquet:"uid,optional"`
	Name   string `parquet:"name,optional"`
	TypeID *int32 `parquet:"type_id,optional"`
	Type   string `parquet:"type,optional,dict"`
}

type ocsfSession struct {
	UID string `parquet:"uid,optional"`
}

// handleCols is the evidence handle (unmapped.acsledger) with the time the
// ledger committed the entry.
type handleCols struct {
	SessionID  string `parquet:"session_id"`
	Position   int64  `parquet:"position"`
	EntryHash  string `parquet:"entry_hash"`
	LeafIndex  int64  `parquet:"leaf_index"`
	Source     string `parquet:"source,optional,dict"`
	Origin     string `parquet:"origin,optional,dict"`
	RecordedAt int64  `parquet:"recorded_at,timestamp(microsecond)"`
}

// classRow is one class's row type: the base columns, and the class's own
// top-level members.
type classRow interface {
	base() *ocsfBase
	// object keeps the value of a top-level member that is not a base
	// column when the class has a column for it.
	object(name string, val []byte) error
}

func (b *ocsfBase) base() *ocsfBase { return b }

// otherRow is a class the table does not know: base columns only.
type otherRow struct{ ocsfBase }

func (*otherRow) object(string, []byte) error { return nil }

// moduleActivityRow is Module Activity (1005).
type moduleActivityRow struct {
	ocsfBase
	Device string `parquet:"device,optional,json"`
	Module string `parquet:"module,optional,json"`
}

func (r *moduleActivityRow) object(n string, v []byte) error {
	switch n {
	case "device":
		r.Device = string(v)
	case "module":
		r.Module = string(v)
	}
	return nil
}

// processActivityRow is Process Activity (1007).
type processActivityRow struct {
	ocsfBase
	Device  string `parquet:"device,optional,json"`
	Process string `parquet:"process,optional,json"`
}

func (r *processActivityRow) object(n string, v []byte) error {
	switch n {
	case "device":
		r.Device = string(v)
	case "process":
		r.Process = string(v)
	}
	return nil
}

// detectionFindingRow is Detection Finding (2004).
type detectionFindingRow struct {
	ocsfBase
	FindingInfo struct {
		UID   string `parquet:"uid,optional"`
		Title string `parquet:"title,optional"`
		Desc  string `parquet:"desc,optional"`
	} `parquet:"finding_info"`
	IsAlert   *bool  `parquet:"is_alert,optional"`
	VerdictID *int32 `parquet:"verdict_id,optional"`
	Verdict   string `parquet:"verdict,optional,dict"`
	Evidences string `parquet:"evidences,optional,json"`
}

func (r *detectionFindingRow) object(n string, v []byte) error {
	var err error
	switch n {
	case "finding_info":
		fi := &r.FindingInfo
		err = scan(v, func(k string, v []byte) error {
			switch k {
			case "uid":
				return str(v, &fi.UID)
			case "title":
				return str(v, &fi.Title)
			case "desc":
				return str(v, &fi.Desc)
			}
			return nil
		})
	case "is_alert":
		var b bool
		if err = json.Unmarshal(v, &b); err == nil {
			r.IsAlert = &b
		}
	case "verdict_id":
		r.VerdictID, err = int32p(v)
	case "verdict":
		err = str(v, &r.Verdict)
	case "evidences":
		r.Evidences = string(v)
	}
	return err
}

// authenticationRow is Authentication (3002).
type authenticationRow struct {
	ocsfBase
	User    string `parquet:"user,optional,json"`
	Session string `parquet:"session,optional,json"`
	Service string `parquet:"service,optional,json"`
}

func (r *authenticationRow) object(n string, v []byte) error {
	switch n {
	case "user":
		r.User = string(v)
	case "session":
		r.Session = string(v)
	case "service":
		r.Service = string(v)
	}
	return nil
}

// authorizeSessionRow is Authorize Session (3003).
type authorizeSessionRow struct {
	ocsfBase
	User       string `parquet:"user,optional,json"`
	Session    string `parquet:"session,optional,json"`
	Privileges string `parquet:"privileges,optional,json"`
}

func (r *authorizeSessionRow) object(n string, v []byte) error {
	switch n {
	case "user":
		r.User = string(v)
	case "session":
		r.Session = string(v)
	case "privileges":
		r.Privileges = string(v)
	}
	return nil
}

// inventoryInfoRow is Device Inventory Info (5001).
type inventoryInfoRow struct {
	ocsfBase
	Device string `parquet:"device,optional,json"`
}

func (r *inventoryInfoRow) object(n string, v []byte) error {
	if n == "device" {
		r.Device = string(v)
	}
	return nil
}

// appLifecycleRow is Application Lifecycle (6002).
type appLifecycleRow struct {
	ocsfBase
	App string `parquet:"app,optional,json"`
}

func (r *appLifecycleRow) object(n string, v []byte) error {
	if n == "app" {
		r.App = string(v)
	}
	return nil
}

// apiActivityRow is API Activity (6003).
type apiActivityRow struct {
	ocsfBase
	API         string `parquet:"api,optional,json"`
	SrcEndpoint string `parquet:"src_endpoint,optional,json"`
}

func (r *apiActivityRow) object(n string, v []byte) error {
	switch n {
	case "api":
		r.API = string(v)
	case "src_endpoint":
		r.SrcEndpoint = string(v)
	}
	return nil
}

// datastoreActivityRow is Datastore Activity (6005).
type datastoreActivityRow struct {
	ocsfBase
	SrcEndpoint string `parquet:"src_endpoint,optional,json"`
	Database    string `parquet:"database,optional,json"`
}

func (r *datastoreActivityRow) object(n string, v []byte) error {
	switch n {
	case "src_endpoint":
		r.SrcEndpoint = string(v)
	case "database":
		r.Database = string(v)
	}
	return nil
}

// classWriters writes the events of one class as a Parquet file, by
// class_uid; 0 is any other class.
var classWriters = map[int32]func(io.Writer, []export.Event, []parquet.WriterOption) error{
	1005: writeClass[moduleActivityRow],
	1007: writeClass[processActivityRow],
	2004: writeClass[detectionFindingRow],
	3002: writeClass[authenticationRow],
	3003: writeClass[authorizeSessionRow],
	5001: writeClass[inventoryInfoRow],
	6002: writeClass[appLifecycleRow],
	6003: writeClass[apiActivityRow],
	6005: writeClass[datastoreActivityRow],
	0:    writeClass[otherRow],
}

// writeParquet writes evs, all of one class, as a Parquet file to w.
func writeParquet(w io.Writer, classUID int32, evs []export.Event, opts []parquet.WriterOption) error {
	f, ok := classWriters[classUID]
	if !ok {
		f = classWriters[0]
	}
	return f(w, evs, opts)
}

// writeClass writes evs as rows of T, in their order (the caller sorts
// them by time).
func writeClass[T any, P interface {
	*T
	classRow
}](w io.Writer, evs []export.Event, opts []parquet.WriterOption) error {
	rows := make([]T, len(evs))
	for i := range evs {
		if err := fillRow(P(&rows[i]), &evs[i]); err != nil {
			return fmt.Errorf("event of entry %s (session %q position %d): %w", evs[i].EntryHash, evs[i].SessionID, evs[i].Position, err)
		}
	}
	pw := parquet.NewGenericWriter[T](w, opts...)
	if _, err := pw.Write(rows); err != nil {
		return err
	}
	return pw.Close()
}

// fillRow sets r's columns from the event's JSON.
func fillRow(r classRow, ev *export.Event) error {
	b := r.base()
	b.Event = string(ev.JSON)
	b.Acsledger = handleCols{SessionID: ev.SessionID, Position: ev.Position, EntryHash: ev.EntryHash,
		LeafIndex: int64(eventLeaf(ev)), RecordedAt: ev.RecordedAt.UnixMicro()}
	return scan(ev.JSON, func(k string, v []byte) error {
		var err error
		switch k {
		case "class_uid":
			b.ClassUID, err = int32v(v)
		case "class_name":
			err = str(v, &b.ClassName)
		case "category_uid":
			b.CategoryUID, err = int32v(v)
		case "category_name":
			err = str(v, &b.CategoryName)
		case "activity_id":
			b.ActivityID, err = int32v(v)
		case "activity_name":
			err = str(v, &b.ActivityName)
		case "type_uid":
			b.TypeUID, err = strconv.ParseInt(string(v), 10, 64)
		case "type_name":
			err = str(v, &b.TypeName)
		case "severity_id":
			b.SeverityID, err = int32v(v)
		case "severity":
			err = str(v, &b.Severity)
		case "status_id":
			b.StatusID, err = int32p(v)
		case "status":
			err = str(v, &b.Status)
		case "time":
			b.Time, err = strconv.ParseInt(string(v), 10, 64)
		case "message":
			err = str(v, &b.Message)
		case "metadata":
			err = fillMetadata(&b.Metadata, v)
		case "actor":
			err = fillActor(&b.Actor, v)
		case "enrichments":
			b.Enrichments = string(v)
		case "attestation_list":
			b.AttestationList = string(v)
		case "unmapped":
			b.Unmapped = string(v)
			err = fillHandle(&b.Acsledger, v)
		default:
			err = r.object(k, v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
}

func fillMetadata(m *ocsfMetadata, v []byte) error {
	return scan(v, func(k string, v []byte) error {
		switch k {
		case "version":
			return str(v, &m.Version)
		case "product":
			return scan(v, func(k string, v []byte) error {
				switch k {
				case "name":
					return str(v, &m.Product.Name)
				case "vendor_name":
					return str(v, &m.Product.VendorName)
				case "version":
					return str(v, &m.Product.Version)
				}
				return nil
			})
		case "uid":
			return str(v, &m.UID)
		case "correlation_uid":
			return str(v, &m.CorrelationUID)
		case "log_name":
			return str(v, &m.LogName)
		case "original_time":
			return str(v, &m.OriginalTime)
		case "profiles":
			return json.Unmarshal(v, &m.Profiles)
		}
		return nil
	})
}

func fillActor(a *ocsfActor, v []byte) error {
	return scan(v, func(k string, v []byte) error {
		switch k {
		case "user":
			u := &a.User
			return scan(v, func(k string, v []byte) error {
				var err error
				switch k {
				case "uid":
					err = str(v, &u.UID)
				case "name":
					err = str(v, &u.Name)
				case "type_id":
					u.TypeID, err = int32p(v)
				case "type":
					err = str(v, &u.Type)
				}
				return err
			})
		case "session":
			return scan(v, func(k string, v []byte) error {
				if k == "uid" {
					return str(v, &a.Session.UID)
				}
				return nil
			})
		}
		return nil
	})
}

// fillHandle takes source and origin from unmapped.acsledger; the rest of
// the handle is the event's own.
func fillHandle(h *handleCols, unmapped []byte) error {
	return scan(unmapped, func(k string, v []byte) error {
		if k != "acsledger" {
			return nil
		}
		return scan(v, func(k string, v []byte) error {
			switch k {
			case "source":
				return str(v, &h.Source)
			case "origin":
				return str(v, &h.Origin)
			}
			return nil
		})
	})
}

// eventLeaf is the Merkle leaf of ev's entry.
func eventLeaf(ev *export.Event) uint64 {
	if ev.Next.Skip > 0 {
		return ev.Next.Leaf
	}
	return ev.Next.Leaf - 1
}

// classAndTime reads an OCSF event's class_uid and time.
func classAndTime(js []byte) (class int32, ms int64, err error) {
	var haveClass, haveTime bool
	err = scan(js, func(k string, v []byte) error {
		var err error
		switch k {
		case "class_uid":
			class, err = int32v(v)
			haveClass = true
		case "time":
			ms, err = strconv.ParseInt(string(v), 10, 64)
			haveTime = true
		default:
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		if haveClass && haveTime {
			return errStop
		}
		return nil
	})
	if err == nil && !(haveClass && haveTime) {
		err = errors.New("not an OCSF event: it lacks class_uid or time")
	}
	return class, ms, err
}

var errStop = errors.New("stop")

// scan calls f with each top-level member of the JSON object obj, until f
// returns an error (errStop ends the scan without one).
func scan(obj []byte, f func(name string, val []byte) error) error {
	var err error
	ok := acs.JSONMembers(obj, func(name, val []byte) bool {
		err = f(string(name), val)
		return err == nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("not a well-formed JSON object")
	}
	return nil
}

// str sets *dst to the JSON string val; null leaves it empty.
func str(val []byte, dst *string) error {
	if string(val) == "null" {
		return nil
	}
	if len(val) < 2 || val[0] != '"' {
		return fmt.Errorf("want a string, got %.40s", val)
	}
	if bytes.IndexByte(val, '\\') < 0 {
		*dst = string(val[1 : len(val)-1])
		return nil
	}
	return json.Unmarshal(val, dst)
}

func int32v(val []byte) (int32, error) {
	n, err := strconv.ParseInt(string(val), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %.40s", val)
	}
	return int32(n), nil
}

func int32p(val []byte) (*int32, error) {
	if string(val) == "null" {
		return nil, nil
	}
	n, err := int32v(val)
	return &n, err
}
