package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/steadydns/steadydns/controlplane/health"
)

// ShiftView is a traffic shift in /api/v1/shifts.
type ShiftView struct {
	Region  string    `json:"region"`
	Reason  string    `json:"reason"`
	Who     string    `json:"who"`
	Started time.Time `json:"started"`
	Expires time.Time `json:"expires"`
}

// maxShiftBody bounds a shift's body: a duration and a reason of at most
// health.MaxShiftReason bytes, escaped.
const maxShiftBody = 1024

func shiftList(w http.ResponseWriter, st State) {
	shifts, err := st.Shifts()
	if err != nil {
		reply(w, err)
		return
	}
	out := []ShiftView{}
	for _, s := range shifts {
		out = append(out, ShiftView(s))
	}
	writeJSON(w, map[string]any{"shifts": out})
}

// putShift takes {"duration": "30m", "reason": "..."}: the region's
// answers leave for that long.
func putShift(w http.ResponseWriter, r *http.Request, st State) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxShiftBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", maxShiftBody))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var req struct {
		Duration string `json:"duration"`
		Reason   string `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, `the body is not {"duration": "30m", "reason": "..."}: `+err.Error())
		return
	}
	d, err := time.ParseDuration(req.Duration)
	if err != nil || d <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("duration %q is not a duration such as 30m, from %s to %s", req.Duration, health.MinShift, health.MaxShift))
		return
	}
	reply(w, st.Shift(r.PathValue("region"), d, req.Reason, client(r)))
}

func deleteShift(w http.ResponseWriter, r *http.Request, st State) {
	reply(w, st.Shift(r.PathValue("region"), 0, "", client(r)))
}

// client names the API's client in a shift: its address, since every
// holder of the write token is the same to the API.
func client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "api client " + host
}
