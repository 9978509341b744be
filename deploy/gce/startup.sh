#!/bin/sh
# The instance template's startup script for a managed instance group of etcd nodes: it writes the
# unit once, then quorate keeps etcd whole across reboots and replacements. Each instance names
# itself after its instance name (its short hostname), the member name the gce provider gives it;
# the peer and client URLs then come from discovery. quorate itself is expected at
# /usr/local/bin/quorate (baked into the image).
set -eu
cat > /etc/systemd/system/quorate.service <<'UNIT'
[Unit]
Description=etcd, bootstrapped and kept whole by quorate
After=network-online.target
Wants=network-online.target
[Service]
ExecStart=/bin/sh -c 'exec /usr/local/bin/quorate run --name "$(hostname -s)" --data-dir /var/lib/etcd --discovery "provider=gce mig=auto"'
KillMode=mixed
TimeoutStopSec=60
Restart=on-failure
RestartSec=5
RestartPreventExitStatus=2
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now quorate
