package keepalived

// The keywords keepalived 2.2 knows (its check_parser.c, check_*.c and
// install_keyword_root calls): a keyword in none of these sets is unknown
// to keepalived itself — a typo or a newer feature — and refused unless
// the caller asks to skip it, so nothing unread passes as converted.

func set(words ...string) map[string]bool {
	m := map[string]bool{}
	for _, w := range words {
		m[w] = true
	}
	return m
}

// rootKeywords other than virtual_server, virtual_server_group,
// vrrp_instance and the include variants: host and VRRP settings.
var rootKeywords = set("SSL", "bfd_instance", "child_wait_time", "garp_group", "global_defs", "instance",
	"interface_up_down_delays", "linkbeat_interfaces", "linkbeat_use_polling", "namespace_with_ipsets",
	"net_namespace", "net_namespace_ipvs", "static_ipaddress", "static_routes", "static_rules", "track_file",
	"track_group", "use_pid_dir", "vrrp_script", "vrrp_sync_group", "vrrp_track_file", "vrrp_track_process")

var vsKeywords = set("ip_family", "retry", "delay_before_retry", "warmup", "connect_timeout", "delay_loop",
	"inhibit_on_failure", "lb_algo", "lvs_sched", "hashed", "ops", "flag-1", "flag-2", "flag-3", "sh-port",
	"sh-fallback", "mh-port", "mh-fallback", "lb_kind", "lvs_method", "persistence_engine", "persistence_timeout",
	"persistence_granularity", "protocol", "ha_suspend", "smtp_alert", "virtualhost", "snmp_name", "alpha", "omega",
	"quorum_up", "quorum_down", "quorum", "hysteresis", "weight", "sorry_server", "sorry_server_inhibit",
	"sorry_server_lvs_method", "real_server")

var rsKeywords = set("weight", "lvs_method", "uthreshold", "lthreshold", "inhibit_on_failure", "notify_up",
	"notify_down", "alpha", "retry", "delay_before_retry", "warmup", "connect_timeout", "delay_loop", "smtp_alert",
	"virtualhost", "snmp_name")

// checkerKinds: the checkers edgelb carries, and the others.
var (
	carriedCheckers = set("TCP_CHECK", "HTTP_GET", "SSL_GET")
	otherCheckers   = set("SMTP_CHECK", "DNS_CHECK", "MISC_CHECK", "BFD_CHECK", "UDP_CHECK", "PING_CHECK", "FILE_CHECK")
)

// checkerKeywords: every checker's common options plus HTTP_GET/SSL_GET's.
var checkerKeywords = set("connect_ip", "connect_port", "bindto", "bind_port", "bind_if", "connect_timeout",
	"fwmark", "retry", "delay_before_retry", "warmup", "delay_loop", "alpha", "log_all_failures",
	"nb_get_retry", "virtualhost", "http_protocol", "enable_sni", "fast_recovery", "url")

var urlKeywords = set("path", "digest", "status_code", "virtualhost", "regex", "regex_no_match", "regex_options",
	"regex_min_offset", "regex_max_offset", "regex_stack")
