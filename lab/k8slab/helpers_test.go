//go:build k8s

package k8slab

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metav1ObjectNamespace = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lab-smoke"}}
