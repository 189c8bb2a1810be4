// Package webui is edgelb's HTTP face: the REST API (/api/v1, described by
// /api/v1/openapi.json), the live Server-Sent Events stream, health and
// metrics endpoints, and the embedded page that uses only that API.
package webui

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgelb/edgelb/announce"
	"github.com/edgelb/edgelb/lb"
	"github.com/edgelb/edgelb/lb/store"
	"github.com/edgelb/edgelb/proxy"
)

// DefaultListen is where the API listens unless told otherwise: loopback,
// so a fresh install exposes nothing.
const DefaultListen = "127.0.0.1:8080"

// Options configures the server. Only Manager is required.
type Options struct {
	Manager lb.Manager
	// Flows feeds the live view; nil shows no connections.
	Flows     proxy.FlowSource
	Reporters []announce.Reporter
	// Health reports the active health checks for GET /api/v1/health (nil: none).
	Health func() []BackendHealth
	// Gatherer is what /metrics exposes (default prometheus.DefaultGatherer).
	Gatherer prometheus.Gatherer
	// Registerer, when set, receives the web UI's own metrics.
	Registerer prometheus.Registerer
	// Token authorises writes (Authorization: Bearer TOKEN) as a write
	// token named LegacyTokenName (config api.tokenFile). With neither it
	// nor a write token in Tokens, writes are refused with 403.
	Token string
	// Tokens are the named read and write credentials (config api.tokens).
	Tokens []Token
	// AnonymousReads serves reads without a token on a listen address
	// beyond loopback (on loopback they are always open). See auth.go.
	AnonymousReads bool
	// Audit, when set, is served as GET /api/v1/audit.
	Audit AuditSource
	// Listen is host:port (default DefaultListen).
	Listen string
	// TLS, when set, serves HTTPS with it (set ClientAuth and ClientCAs for mTLS).
	TLS *tls.Config
	// Ready reports readiness for /readyz (nil: always ready).
	Ready func(context.Context) error
	// StoreTrouble, when set and not nil, is shown in /readyz's body (the
	// last state store commit failed: a full disk); /readyz stays 200, as
	// forwarding goes on.
	StoreTrouble func() error
	// StoreHealth and StoreRevision describe a store shared by a fleet
	// (etcd; nil otherwise): answers carry the revision applied and, while
	// StoreHealth is not nil, a header saying they may be stale (fleet.go).
	StoreHealth   func() error
	StoreRevision func() int64
	// Fleet lists the fleet's gateways for GET /api/v1/fleet (nil: 404,
	// not a fleet); FleetName is this gateway's name in it.
	Fleet     func(context.Context) ([]store.GatewayStatus, error)
	FleetName string
	// BodyLimit caps request bodies in bytes (default 64 KiB).
	BodyLimit int64
	// RateLimit is requests per second per peer address, with RateBurst
	// (defaults 20 and 40); negative disables the limiter.
	RateLimit float64
	RateBurst int
	Logger    *slog.Logger

	// Live view tuning; zero values take the defaults in parentheses.
	FlowResync time.Duration // authoritative flow snapshot period (10s)
	// FlowWatchIdle is how long conntrack events are followed, and the
	// pools/services state kept current, after the last live-view client
	// left (30s); negative does both always (exact flow totals, at a cost
	// to every connection through the host: see hub.runFlows).
	FlowWatchIdle    time.Duration
	PollInterval     time.Duration // pools, services, announcers (2s)
	BatchInterval    time.Duration // flow changes per delta event (250ms)
	KeepAlive        time.Duration // SSE comment line period (15s)
	StreamWrite      time.Duration // a stream write blocked this long drops the client (30s)
	ClientQueue      int           // frames queued per client before it is coalesced (256)
	ClientQueueBytes int           // bytes queued per client before it is coalesced (1 MiB)
	HistoryBytes     int           // recent frames kept for Last-Event-ID resume (4 MiB)
	MaxSnapshotFlows int           // flows in a snapshot, newest first (2000)
}

func (o *Options) defaults() {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.DefaultGatherer
	}
	if o.BodyLimit <= 0 {
		o.BodyLimit = 64 << 10
	}
	if o.RateLimit == 0 {
		o.RateLimit = 20
	}
	if o.RateBurst <= 0 {
		o.RateBurst = 40
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.FlowResync, 10*time.Second)
	if o.FlowWatchIdle == 0 {
		o.FlowWatchIdle = 30 * time.Second
	}
	def(&o.PollInterval, 2*time.Second)
	def(&o.BatchInterval, 250*time.Millisecond)
	def(&o.KeepAlive, 15*time.Second)
	def(&o.StreamWrite, 30*time.Second)
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt(&o.ClientQueue, 256)
	defInt(&o.ClientQueueBytes, 1<<20)
	defInt(&o.HistoryBytes, 4<<20)
	defInt(&o.MaxSnapshotFlows, 2000)
}

// Server is the web UI and REST API.
type Server struct {
	opts     Options
	log      *slog.Logger
	e        *echo.Echo
	hub      *hub
	creds    []credential
	canWrite bool
	// readsNeedToken: the listen address is beyond loopback and anonymous
	// reads were not asked for.
	readsNeedToken bool
	limiter        *limiter
	cop            *http.CrossOriginProtection
	poke           chan struct{}

	mu      sync.Mutex
	srv     *http.Server
	ln      net.Listener
	cancel  context.CancelFunc
	running bool
	streams chan struct{} // closed when streams must end
	primed  chan struct{} // closed once Run has loaded the first state
	wg      sync.WaitGroup
}

// New builds the server; nothing listens and no loop runs until Start (or Run).
func New(opts Options) (*Server, error) {
	if opts.Manager == nil {
		return nil, errors.New("webui: Options.Manager is required")
	}
	opts.defaults()
	if _, _, err := net.SplitHostPort(opts.Listen); err != nil {
		return nil, fmt.Errorf("webui: listen address %q: %w", opts.Listen, err)
	}
	s := &Server{opts: opts, log: opts.Logger, cop: http.NewCrossOriginProtection(),
		poke: make(chan struct{}, 1), streams: make(chan struct{}), primed: make(chan struct{})}
	s.creds = credentials(&opts)
	for _, c := range s.creds {
		s.canWrite = s.canWrite || c.role == RoleWrite
	}
	s.readsNeedToken = ReadsNeedToken(opts.Listen, opts.AnonymousReads)
	if opts.RateLimit > 0 {
		s.limiter = newLimiter(opts.RateLimit, opts.RateBurst)
	}
	s.hub = newHub(hubConfig{batch: opts.BatchInterval,
		queueFrames: opts.ClientQueue, queueBytes: opts.ClientQueueBytes, historyBytes: opts.HistoryBytes, watchIdle: opts.FlowWatchIdle,
		maxSnapFlows: opts.MaxSnapshotFlows, now: time.Now, log: opts.Logger})
	if err := s.registerMetrics(); err != nil {
		return nil, err
	}
	s.e = s.routes()
	return s, nil
}

func (s *Server) registerMetrics() error {
	if s.opts.Registerer == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edgelb_webui_stream_clients",
			Help: "Server-Sent Events clients connected."}, func() float64 { return float64(s.hub.clientCount()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "edgelb_webui_stream_resyncs_total",
			Help: "Times a slow stream client's queued events were coalesced into a snapshot."}, func() float64 {
			s.hub.mu.Lock()
			defer s.hub.mu.Unlock()
			return float64(s.hub.resyncs)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edgelb_webui_flows_live",
			Help: "Live flows through edgelb as the web UI sees them."}, func() float64 {
			s.hub.mu.Lock()
			defer s.hub.mu.Unlock()
			return float64(len(s.hub.flows))
		}),
	} {
		if err := s.opts.Registerer.Register(c); err != nil {
			return fmt.Errorf("webui: register metrics: %w", err)
		}
	}
	return nil
}

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	// Never derive the client address from headers (X-Forwarded-For...).
	e.IPExtractor = echo.ExtractIPDirect()
	e.Use(middleware.Recover(), securityHeaders, s.fleetHeaders, validUTF8)

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{})), s.requireRead)
	s.staticRoutes(e)
	s.pprofRoutes(e)

	// Middleware per route rather than per group: an echo group with
	// middleware registers catch-all routes, which would turn a 404 into a 401.
	read := func(path string, h echo.HandlerFunc) { e.GET("/api/v1"+path, h, s.rateLimit, s.requireRead) }
	write := func(method, path string, h echo.HandlerFunc) {
		e.Add(method, "/api/v1"+path, h, s.rateLimit, s.crossOrigin, s.requireToken)
	}
	// The API's description is public: it holds no state.
	e.GET("/api/v1/openapi.json", s.openapi, s.rateLimit)
	read("/pools", s.listPools)
	read("/pools/:name", s.getPool)
	read("/services", s.listServices)
	read("/services/:name", s.getService)
	read("/flows", s.listFlows)
	read("/stats", s.getStats)
	read("/announce", s.getAnnounce)
	read("/fleet", s.getFleet)
	read("/health", s.getHealth)
	read("/events", s.events)
	read("/audit", s.getAudit)
	write(http.MethodPost, "/pools", s.createPool)
	write(http.MethodPut, "/pools/:name", s.updatePool)
	write(http.MethodDelete, "/pools/:name", s.deletePool)
	write(http.MethodPut, "/services/:name", s.putService)
	write(http.MethodDelete, "/services/:name", s.deleteService)
	return e
}

// Handler is the whole HTTP surface, for httptest or an outer mux. The live
// view needs Run (or Start) to be running.
func (s *Server) Handler() http.Handler { return s.e }

// Run runs the live view's loops (flow watch and resync, batching, polling)
// until ctx ends, then ends open streams. Start calls it; call it yourself
// only when serving Handler() elsewhere.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	// Prime the flows before anything is served from them; the pools,
	// services and announce state is read when a stream needs it
	// (hub.wantState).
	if s.hub.wantState() {
		s.hub.refreshState(ctx, s.opts.Manager, s.opts.Reporters)
	}
	if s.opts.Flows != nil {
		s.hub.resyncFlows(ctx, s.opts.Flows)
		wg.Add(1)
		go func() { defer wg.Done(); s.hub.runFlows(ctx, s.opts.Flows, s.opts.FlowResync) }()
	}
	s.hub.flush()
	close(s.primed)
	wg.Add(1)
	go func() { defer wg.Done(); s.hub.runBatches(ctx) }()
	wg.Add(1)
	go func() { defer wg.Done(); s.hub.runSeries(ctx, SeriesStep) }()
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
		case <-s.poke:
		}
		if s.hub.wantState() {
			s.hub.refreshState(ctx, s.opts.Manager, s.opts.Reporters)
		} else {
			s.hub.dropState()
		}
	}
	s.endStreams()
	wg.Wait()
}

func (s *Server) endStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.streams:
	default:
		close(s.streams)
	}
}

// changed asks for an immediate refresh of pools and services after a write.
func (s *Server) changed() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// Start listens on Options.Listen and serves until Shutdown; it returns
// once the socket is open (so the caller can report the address).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return errors.New("webui: already started")
	}
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("webui: listen on %s: %w", s.opts.Listen, err)
	}
	if s.opts.TLS != nil {
		ln = tls.NewListener(ln, s.opts.TLS)
	}
	s.srv = &http.Server{
		Handler:           s.e,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Streams lift this per write (see events); everything else must
		// finish in time.
		WriteTimeout:   30 * time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		TLSConfig:      s.opts.TLS,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.ln = ln
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.running = true
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.Run(runCtx) }()
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("webui: serve", "err", err)
		}
	}()
	s.log.Info("webui: listening", "addr", ln.Addr().String(), "tls", s.opts.TLS != nil)
	return nil
}

// Primed is closed once Run has loaded pools, services, announcers and the
// first flow snapshot.
func (s *Server) Primed() <-chan struct{} { return s.primed }

// Addr is the listening address once started.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown ends streams, stops accepting, waits for requests in flight
// (until ctx ends) and stops the loops.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return nil
	}
	s.running = false
	srv, cancel := s.srv, s.cancel
	s.mu.Unlock()
	s.endStreams()
	err := srv.Shutdown(ctx)
	if err != nil {
		// Out of time (e.g. a stream stuck writing to a stalled client): cut the rest.
		_ = srv.Close()
	}
	cancel()
	s.wg.Wait()
	return err
}
