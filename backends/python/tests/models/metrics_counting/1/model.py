"""Counts its requests in custom metrics (a counter, a gauge and a histogram, labelled by
model and version) and answers with the values it reads back."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.requests_family = pb_utils.MetricFamily(
            name="pymodel_requests", description="Requests the model executed", kind=pb_utils.MetricFamily.COUNTER
        )
        self.size_family = pb_utils.MetricFamily(
            name="pymodel_last_size",
            description="Elements in the last request, minus one",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        self.histogram_family = pb_utils.MetricFamily(
            name="pymodel_request_elements", description="Elements per request", kind=pb_utils.MetricFamily.HISTOGRAM
        )
        self.requests = self.requests_family.Metric(labels=labels)
        self.last_size = self.size_family.Metric(labels=labels)
        self.elements = self.histogram_family.Metric(labels={**labels, "unit": "elements"}, buckets=[1, 4, 16])

    def execute(self, requests):
        responses = []
        for request in requests:
            size = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy().size
            self.requests.increment(1)
            self.last_size.set(size)
            self.last_size.increment(-1)
            self.elements.observe(size)
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        pb_utils.Tensor("REQUESTS", np.array([self.requests.value()], dtype=np.float64)),
                        pb_utils.Tensor("LAST_SIZE", np.array([self.last_size.value()], dtype=np.float64)),
                    ]
                )
            )
        return responses
