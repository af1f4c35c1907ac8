// Package deploy holds the deployment kit and its tests: the Helm chart
// (helm/danmaku), the Grafana dashboard (grafana/), the Prometheus
// configuration and alert rules (prometheus/) and the nginx edge of
// docker-compose.yml (nginx.conf). The tests render the chart with a pinned
// helm, check the rules with promtool, check that every series the
// dashboard and the rules name is served by the binaries, and pin the
// security properties of the compose file and the edge. See README.md
// beside this file.
package deploy
